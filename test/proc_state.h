/*
 * Tests' helper: the state letter of a process in /proc (R, S, T for stopped, Z...), for the
 * tests that stop a peer and must wait until it really is stopped.
 */
#ifndef CGPU_TEST_PROC_STATE_H
#define CGPU_TEST_PROC_STATE_H

#include <stdio.h>
#include <string.h>
#include <sys/types.h>

/* The state letter of process @p pid (0 when unreadable). */
static inline char test_proc_state(pid_t pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int) pid);
    FILE *f = fopen(path, "r");
    size_t n = NULL != f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
    if (NULL != f) {
        fclose(f);
    }
    buf[n] = '\0';
    const char *p = strrchr(buf, ')'); /* the command name may hold spaces and parentheses */
    return NULL != p && ' ' == p[1] ? p[2] : 0;
}

#endif
