/*
 * Checks inside a forked child of the unit tests (test_engine, test_proxy).
 *
 * CUnit's assertions must not be used inside a child: they would only change the child's
 * copy of the registry. A child counts its failures here instead, printing file:line with
 * its rank (at most CHILD_MAX_REPORTS lines), and exits with the count as its status. A
 * failed check returns false and never skips anything by itself, so the ranks stay in
 * lockstep.
 */
#ifndef CGPU_TEST_CHILD_CHECK_H
#define CGPU_TEST_CHILD_CHECK_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>

#define CHILD_MAX_REPORTS 20 /* failure lines one child prints at most */

static int child_rank = -1;
static int child_size;
static int child_failures;

static bool child_check(bool ok, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5), unused));

/* Count a failure and say where it happened; returns @p ok so callers can branch on it. */
static bool child_check(bool ok, const char *file, int line, const char *fmt, ...)
{
    if (ok) {
        return true;
    }
    if (child_failures < CHILD_MAX_REPORTS) {
        char msg[512];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        fprintf(stderr, "    %s:%d: rank %d of %d: %s\n", file, line, child_rank, child_size, msg);
    }
    ++child_failures;
    return false;
}

#define CHILD_CHECK(cond)       child_check(!!(cond), __FILE__, __LINE__, "check failed: %s", #cond)
#define CHILD_CHECKF(cond, ...) child_check(!!(cond), __FILE__, __LINE__, __VA_ARGS__)

#endif /* CGPU_TEST_CHILD_CHECK_H */
