/*
 * coll/gpu base: process liveness from kill(pid, 0) and /proc/<pid>/stat.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cgpu_proc.h"

/* Reads /proc/<pid>/stat: its state letter and start time. Returns 1 when read, 0 when
 * the process does not exist (ENOENT, ESRCH), -1 when /proc cannot say. */
static int read_stat(pid_t pid, char *state, uint64_t *start)
{
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%ld/stat", (long) pid);
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return ENOENT == errno || ESRCH == errno ? 0 : -1;
    }
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    const int err = errno;
    close(fd);
    if (n <= 0) {
        return n < 0 && ESRCH == err ? 0 : -1;
    }
    buf[n] = '\0';
    /* field 2, the command, is in parentheses and may hold spaces and parentheses itself:
     * the fields after it start past the last ')' */
    const char *p = strrchr(buf, ')');
    if (NULL == p || ' ' != p[1] || '\0' == p[2]) {
        return -1;
    }
    *state = p[2];
    p += 2;
    for (int field = 3; field < 22; ++field) { /* p at field 3 (state); starttime is 22 */
        p = strchr(p, ' ');
        if (NULL == p) {
            return -1;
        }
        ++p;
    }
    char *end = NULL;
    *start = strtoull(p, &end, 10);
    return end != p ? 1 : -1;
}

uint64_t cgpu_proc_start_time(pid_t pid)
{
    char state = 0;
    uint64_t start = 0;
    return 1 == read_stat(pid, &state, &start) ? start : 0;
}

cgpu_proc_state_t cgpu_proc_check(pid_t pid, uint64_t start_time, bool full)
{
    if (pid <= 0) {
        return CGPU_PROC_ALIVE; /* not a process we can ask about */
    }
    if (0 != kill(pid, 0) && ESRCH == errno) {
        return CGPU_PROC_GONE;
    }
    if (!full) {
        return CGPU_PROC_ALIVE;
    }
    char state = 0;
    uint64_t start = 0;
    const int r = read_stat(pid, &state, &start);
    if (0 == r) {
        return CGPU_PROC_GONE;
    }
    if (r < 0) {
        return CGPU_PROC_ALIVE;
    }
    /* Z: killed, its parent has not reaped it yet; X: being reaped */
    if ('Z' == state || 'X' == state || (0 != start_time && start != start_time)) {
        return CGPU_PROC_GONE;
    }
    return CGPU_PROC_ALIVE;
}
