/*
 * coll/gpu base: what the calling thread may do, and the MPI progress hook.
 *
 * Two kinds of threads run our code: the application's, which may call into MPI, and our
 * workers (non-blocking collectives), which never may (no lock is held across MPI, and a
 * worker inside MPI's progress could re-enter itself). Waits at every layer ask these
 * questions, so they live at the bottom: a CUDA wait must know whether to run MPI's
 * progress and whether it shares its core with the application.
 */
#ifndef CGPU_THREAD_H
#define CGPU_THREAD_H

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

/** The progress of the library around us (the glue passes Open MPI's). */
typedef void (*cgpu_progress_fn_t)(void);

/**
 * Set the progress function that cgpu_progress runs (NULL: waits only wait), and turn it
 * on or off: off while the engine is down, since MPI may be finalizing.
 */
void cgpu_progress_setup(cgpu_progress_fn_t fn, bool on);

/**
 * Run the progress function from a blocking wait that has lasted a while: a peer blocked
 * in a receive that this rank must push keeps moving (MPI's progress rule). Nothing on a
 * worker thread, nothing when called again from inside the progress function.
 */
void cgpu_progress(void);

/** From a wait loop's @p it-th poll: cgpu_progress every 8th poll past the first @p after
 * (only a wait that lasts pays for it). */
static inline void cgpu_progress_poll(unsigned it, unsigned after)
{
    if (it >= after && 0 == (it & 7)) {
        cgpu_progress();
    }
}

/** Mark the calling thread as a worker (true), which never calls MPI, or not. */
void cgpu_thread_set_worker(bool worker);

/** Whether the calling thread may call MPI (bootstrap exchanges, progress). */
bool cgpu_thread_may_call_mpi(void);

/** Whether the calling thread is bound to exactly one CPU (asked once per thread). */
bool cgpu_thread_one_cpu(void);

/** Whether the calling thread is a worker bound to one CPU, which it then shares with the
 * application's thread: its waits give the core away between polls. */
bool cgpu_thread_worker_shares_cpu(void);

#ifdef __cplusplus
}
#endif

#endif /* CGPU_THREAD_H */
