/*
 * coll/gpu engine: one helper thread per process, which takes a share of a host
 * computation while the calling thread does the rest.
 *
 * The allreduce in the stage areas (ranks sharing a GPU) spends a third of its time in the
 * host's reduction, one core per rank; a second core takes half of it. The helper is made at
 * its first use and runs one task at a time. A caller that finds it busy (another
 * communicator's call on another thread), switched off or not startable does all the work
 * itself, which only costs time: no rank needs to know what its peers chose. Its tasks touch
 * host memory only (no MPI, no CUDA, no waits on peers), so a task always returns.
 */
#ifndef CGPU_HELPER_H
#define CGPU_HELPER_H

#include <stdbool.h>

typedef void (*cgpu_helper_fn_t)(void *arg);

/** Run fn(arg) on the helper: true when it runs there (cgpu_helper_join before arg's memory
 * goes), false when the caller must run it itself. */
bool cgpu_helper_start(cgpu_helper_fn_t fn, void *arg);

/** Wait until the task of the last successful cgpu_helper_start has returned; the helper is
 * free for the next caller. */
void cgpu_helper_join(void);

/** Tasks started so far (tests: whether the helper took part). */
unsigned long cgpu_helper_tasks(void);

/** Stop and join the thread (engine fini); a later start makes a new one. */
void cgpu_helper_fini(void);

#endif /* CGPU_HELPER_H */
