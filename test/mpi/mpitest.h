/*
 * mpitest.h - shared helpers for the coll/gpu MPI integration tests.
 *
 * Every test program is a plain MPI program run by test/run_all.sh under mpirun.
 * The helpers give it:
 *   - a failure recorder (MT_CHECK) that prints "file:line: message" with the rank,
 *   - MPI_T performance-variable readers that say which path (coll/gpu engine or the
 *     fallback to the previous coll module) served the calls made on a communicator,
 *   - one final report that every rank agrees on (mt_finalize) and an exit code.
 *
 * The pvars are looked up by name because their indices differ between runs.
 * Environment:
 *   CGPU_TEST_SKIP_PVARS=1   pvar checks are skipped instead of failing when the pvars
 *                            do not exist (to validate the reference logic of the tests
 *                            against stock Open MPI, without coll/gpu).
 *   CGPU_TEST_VERBOSE=1      print progress lines on rank 0.
 *   CGPU_TEST_MAX_PRINT=N    print at most N failures per rank (default 25).
 */
#ifndef CGPU_TEST_MPITEST_H
#define CGPU_TEST_MPITEST_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

/* Names of the per-communicator counters registered by coll/gpu. */
#define MT_PVAR_ENGINE_NAME "coll_gpu_engine_calls"
#define MT_PVAR_FALLBACK_NAME "coll_gpu_fallback_calls"

/* Which path a batch of calls is expected to take. */
typedef enum {
    MT_PATH_ENGINE = 0,   /* served by the coll/gpu engine */
    MT_PATH_FALLBACK = 1, /* handed by coll/gpu to the previous coll module */
} mt_path_t;

/* Counter readers for one communicator. */
typedef struct {
    MPI_Comm comm;
    char label[64];
    int size;
    int have[2];                 /* handle allocated for [engine, fallback] */
    MPI_T_pvar_handle handle[2]; /* MPI_T handles bound to comm */
    unsigned long long mark[2];  /* values at the last mt_pvars_mark() */
} mt_pvars_t;

/**
 * mt_init - MPI_Init, MPI_T_init_thread, pvar lookup, MPI_T session.
 * @prog: name used in the report.
 * Missing pvars are recorded as one failure each (unless CGPU_TEST_SKIP_PVARS=1).
 */
void mt_init(int *argc, char ***argv, const char *prog);

/** mt_init_thread - mt_init with MPI_Init_thread at the @required level (checked). */
void mt_init_thread(int *argc, char ***argv, const char *prog, int required);

/**
 * mt_finalize - frees the MPI_T session, MPI_T_finalize (must come before MPI_Finalize
 * in Open MPI 4.1), agrees on the failure count with an MPI_Allreduce(MPI_MAX) on
 * MPI_COMM_WORLD, prints the report on rank 0 and calls MPI_Finalize.
 * Return: the exit code for main(): 0 when no rank failed, 1 otherwise.
 */
int mt_finalize(void);

/** mt_check - records one check; on failure prints rank, file:line and the message. */
void mt_check(int ok, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#define MT_CHECK(cond, ...) mt_check(!!(cond), __FILE__, __LINE__, __VA_ARGS__)

/* MPI return-code check: records a failure with the MPI error string. */
#define MT_CHECK_MPI(call)                                                                         \
    do {                                                                                           \
        int mt_rc_ = (call);                                                                       \
        mt_check(MPI_SUCCESS == mt_rc_, __FILE__, __LINE__, "%s returned %d (%s)", #call, mt_rc_,  \
                 mt_mpi_errstr(mt_rc_));                                                           \
    } while (0)

/** mt_mpi_errstr - the MPI error string of rc (static buffer). */
const char *mt_mpi_errstr(int rc);

/** mt_note - prints a line on rank 0 when CGPU_TEST_VERBOSE is set. */
void mt_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/** mt_world_rank / mt_world_size - rank and size in MPI_COMM_WORLD. */
/* Whether the environment sets MCA param coll_gpu_<name> to @p value (mpirun exports
 * --mca settings as OMPI_MCA_ variables). */
int mt_mca_is(const char *name, const char *value);

int mt_world_rank(void);
int mt_world_size(void);

/** mt_world_ranks - the world rank of each rank of @comm, in a new array (free() it). */
int *mt_world_ranks(MPI_Comm comm);

/** mt_failures - failures recorded so far on this rank. */
long mt_failures(void);

/**
 * mt_pvars_available - 1 when both coll/gpu pvars exist in this process.
 */
int mt_pvars_available(void);

/**
 * mt_pvars_open - allocates and starts the engine/fallback handles bound to @comm.
 * @label: name of the communicator used in messages ("world", "dup", "split0"...).
 * Errors are recorded as failures on communicators of 2+ ranks; on single-rank
 * communicators (which coll/gpu declines) they are tolerated and read as 0.
 */
void mt_pvars_open(mt_pvars_t *p, MPI_Comm comm, const char *label);

/** mt_pvars_close - stops and frees the handles; call before freeing the comm. */
void mt_pvars_close(mt_pvars_t *p);

/** mt_pvars_mark - remembers the current counter values (start of a batch). */
void mt_pvars_mark(mt_pvars_t *p);

/**
 * mt_pvars_delta - counter changes since the last mark.
 * Return: 0 on success, -1 when a pvar is missing or could not be read.
 */
int mt_pvars_delta(mt_pvars_t *p, unsigned long long *engine, unsigned long long *fallback);

/**
 * mt_expect_path - checks the counters since the last mark, then marks again.
 * @ncalls: collective calls made on p->comm since the mark that reach the coll layer:
 *          Open MPI returns early, before any coll module, from MPI_Allreduce with
 *          count 0 and from MPI_Alltoall with 0 bytes per peer; do not count those.
 * @path:   the path they must have taken.
 * On 2+ ranks: the counter of @path grew by @ncalls and the other did not move.
 * On 1 rank:   engine_calls did not move (coll/gpu declines such communicators).
 * @what:   description of the batch for the message.
 */
void mt_expect_path(mt_pvars_t *p, long ncalls, mt_path_t path, const char *file, int line,
                    const char *what);

#define MT_EXPECT_PATH(p, n, path, what)                                                           \
    mt_expect_path((p), (n), (path), __FILE__, __LINE__, (what))

/**
 * mt_run_world_dup_split - runs @suite on MPI_COMM_WORLD, on a dup of it and on a split
 * into odd and even ranks (single-rank halves with np 2 or 3, which coll/gpu declines),
 * with salts @salt0 + 1, + 2, + 3; frees what it created.
 */
void mt_run_world_dup_split(void (*suite)(MPI_Comm comm, const char *label, uint64_t salt),
                            uint64_t salt0);

/** mt_pvar_index - index of the MPI_T pvar named @name, or -1; *is_int: its type is MPI_INT. */
int mt_pvar_index(const char *name, int *is_int);

/** mt_comm_int_pvar - the MPI_INT pvar @name bound to @comm, read once; -1 where it is missing
 * or unreadable (MPI_T must be initialized). */
int mt_comm_int_pvar(MPI_Comm comm, const char *name);

/** A process-wide (unbound) counter pvar. Open MPI reports a counter as what it grew since
 * its handle was allocated, so one reader spans what it measures. */
typedef struct mt_proc_pvar {
    MPI_T_pvar_session session;
    MPI_T_pvar_handle handle;
    int ok;
} mt_proc_pvar_t;

/** mt_proc_pvar_open - allocates the reader; a pvar that is missing or cannot be bound is
 * recorded as a failure (and then reads as 0). */
void mt_proc_pvar_open(mt_proc_pvar_t *p, const char *name);
/** mt_comm_pvar_open - the same for a counter bound to @comm (read with mt_proc_pvar_read). */
void mt_comm_pvar_open(mt_proc_pvar_t *p, const char *name, MPI_Comm comm);
/** mt_proc_pvar_read - growth since mt_proc_pvar_open. */
unsigned long long mt_proc_pvar_read(mt_proc_pvar_t *p);
void mt_proc_pvar_close(mt_proc_pvar_t *p);

/** mt_hash - a well-mixed 64-bit hash of four values (splitmix64 based). */
uint64_t mt_hash(uint64_t a, uint64_t b, uint64_t c, uint64_t d);

/** mt_xmalloc - malloc that aborts the job with a message when out of memory. */
void *mt_xmalloc(size_t n);

#endif /* CGPU_TEST_MPITEST_H */
