/*
 * coll/gpu base: is a process on this machine still the one it was?
 *
 * A rank waiting on a peer's counter in shared memory cannot tell a slow peer from a dead
 * one by the counter alone. The process id says whether the peer still exists; the start
 * time (field 22 of /proc/<pid>/stat, clock ticks since boot) says whether that id still
 * names the same process, since ids are reused once freed. Both are cheap enough to ask
 * every few milliseconds of a wait that has already lasted, and never on a fast path.
 */
#ifndef CGPU_PROC_H
#define CGPU_PROC_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum cgpu_proc_state {
    CGPU_PROC_ALIVE = 0, /* exists, and (when asked) is the same process */
    CGPU_PROC_GONE = 1,  /* exited, killed (zombie too), or its id now names another */
} cgpu_proc_state_t;

/**
 * The start time of process @p pid as this process sees it in /proc (clock ticks since
 * boot); 0 when /proc cannot say (not mounted, not readable, no such process).
 */
uint64_t cgpu_proc_start_time(pid_t pid);

/**
 * Whether process @p pid, which started at @p start_time (cgpu_proc_start_time), still runs.
 * A quick look (@p full false) is one kill(pid, 0): gone only when no process has that id.
 * A full look also reads /proc/<pid>/stat: a zombie (killed, not yet reaped by its parent)
 * or a process with another start time (the id was reused) is gone too. Anything this
 * process cannot see (no permission, no /proc) counts as alive: a wrong "gone" would fail
 * a healthy job, a wrong "alive" only leaves the watchdog's timeout to act.
 */
cgpu_proc_state_t cgpu_proc_check(pid_t pid, uint64_t start_time, bool full);

#ifdef __cplusplus
}
#endif

#endif /* CGPU_PROC_H */
