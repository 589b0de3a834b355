/*
 * coll/gpu: engine failures as MPI error codes a program can read.
 *
 * Most failures map onto a predefined class (mca_coll_gpu_status_to_mpi) with the details
 * in the log. A peer process that died is different: the program's error handler is what
 * a user sees, and "MPI_ERR_OTHER: known error not in list" says nothing. So the first
 * call that finds the death makes an error code of its own for that communicator, whose
 * MPI_Error_string names the dead rank (in the communicator and in MPI_COMM_WORLD) and the
 * call; every later call on the communicator returns the same code (the engine refuses
 * them all, cgpu_comm_dead_peer). Across nodes only the dead rank's node sees the death; a
 * rank elsewhere sees a wait give up (coll_gpu_ras_timeout, the watchdog), and its code's
 * string names the rank that did not answer (cgpu_comm_unanswered: the wait's peer, or the
 * rank that peer named when it had given up itself), or with none known the call that made
 * no progress; the communicator is failed all the same. A call whose ranks disagree
 * (cgpu_call.c: sizes, roots, ops) likewise gets a code of the class of what differs, whose
 * string names both ranks' values: the class alone cannot say which ranks passed what.
 *
 * Why MPI_Add_error_code/MPI_Add_error_string, at first failure, on the calling thread:
 * - the class: MPI_ERR_PROC_FAILED exists only in Open MPI builds with ULFM (MPIX_, in
 *   mpi-ext.h; Debian's 4.1 has none), and a class made with MPI_Add_error_class would be
 *   one no program can name; so ULFM's where it exists, else MPI_ERR_OTHER, which every
 *   program can test with MPI_Error_class and which the standard allows a code to refine;
 * - when: a code per death, made when it happens, costs nothing in jobs where nobody dies
 *   (codes made at set-up could not name the rank anyway);
 * - where: these are MPI calls. Open MPI 4.1's MPI_Add_error_code takes no lock a
 *   collective holds (it appends to the code table and sets MPI_LASTUSEDCODE on
 *   MPI_COMM_WORLD), so it is safe inside a collective on an application thread. Our
 *   workers never call MPI (a worker's failure reaches the program through the request's
 *   completion, which runs on an application thread); a call from anywhere else gets the
 *   bare class, with the message in the log. The table itself has no lock in 4.1: a
 *   program adding codes on another thread at the same instant would race with us as it
 *   would with itself (its own adds need serialising under MPI_THREAD_MULTIPLE anyway).
 * - bounded: one code per failed communicator, and at most CGPU_ERR_CODES_MAX in all.
 *
 * The refusal (mca_coll_gpu_refused): a process that died never takes part again, and
 * without ULFM nothing below us says so: the previous module's barrier, or any call the
 * engine leaves to it, would wait for it for ever. So every entry point of ours first asks
 * whether its communicator is known to have lost a process (its engine communicator found
 * one, or failed; or the process died in another communicator of this process: the dead
 * processes are kept by name, process-wide) and then returns the error at once, naming the
 * rank where it can. The question costs one atomic load until a death is known anywhere.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "coll_gpu.h"

#include "ompi/proc/proc.h"

#define CGPU_ERR_CODES_MAX 256

static atomic_int codes_made;

/* The processes found dead, by name (the first CGPU_DEAD_MAX: a job that loses more has
 * failed many times over; its communicators' own engines still find theirs). Entries below
 * dead_count are written once, before the count that publishes them. */
#define CGPU_DEAD_MAX 64
static struct {
    opal_process_name_t name;
    long pid;
} dead_procs[CGPU_DEAD_MAX];
static atomic_int dead_count;
static pthread_mutex_t dead_lock = PTHREAD_MUTEX_INITIALIZER;

/* bumped whenever a death is noted or a communicator fails: entry points look again */
_Atomic unsigned mca_coll_gpu_dead_gen;

/* Rank @p rank of @p comm (process @p pid) died. */
static void note_dead(struct ompi_communicator_t *comm, int rank, long pid)
{
    if (rank < 0 || rank >= ompi_comm_size(comm)) {
        return;
    }
    const ompi_proc_t *p = ompi_comm_peer_lookup(comm, rank);
    if (NULL == p) {
        return;
    }
    pthread_mutex_lock(&dead_lock);
    const int n = atomic_load(&dead_count);
    bool known = false;
    for (int i = 0; i < n && !known; ++i) {
        known = dead_procs[i].name.jobid == p->super.proc_name.jobid &&
                dead_procs[i].name.vpid == p->super.proc_name.vpid;
    }
    if (!known && n < CGPU_DEAD_MAX) {
        dead_procs[n].name = p->super.proc_name;
        dead_procs[n].pid = pid;
        atomic_store(&dead_count, n + 1);
    }
    pthread_mutex_unlock(&dead_lock);
    atomic_fetch_add(&mca_coll_gpu_dead_gen, 1);
}

/* The world rank of @p rank of @p comm, or -1. */
static long world_rank_of(struct ompi_communicator_t *comm, int rank)
{
    if (rank < 0 || rank >= ompi_comm_size(comm)) {
        return -1;
    }
    const ompi_proc_t *p = ompi_comm_peer_lookup(comm, rank);
    return NULL != p ? (long) p->super.proc_name.vpid : -1;
}

/* The code of @p m's communicator, class @p cls, whose string is @p msg: made once, by the
 * first failed call that may call MPI; every later call on the communicator returns it. */
static int failed_code(mca_coll_gpu_module_t *m, int cls, const char *msg)
{
    int code = atomic_load(&m->dead_code);
    if (code > 0) {
        return code;
    }
    int expected = 0;
    if (!cgpu_thread_may_call_mpi() ||
        !atomic_compare_exchange_strong(&m->dead_code, &expected, -1)) {
        return cls; /* no MPI from here, or another thread is making the code */
    }
    if (atomic_fetch_add(&codes_made, 1) >= CGPU_ERR_CODES_MAX ||
        MPI_SUCCESS != MPI_Add_error_code(cls, &code) ||
        MPI_SUCCESS != MPI_Add_error_string(code, msg)) {
        atomic_store(&m->dead_code, 0);
        return cls;
    }
    atomic_store(&m->dead_code, code);
    return code;
}

/* The code of @p m's communicator, whose rank @p dead (process @p pid) died. */
static int dead_code_of(mca_coll_gpu_module_t *m, const char *what,
                        struct ompi_communicator_t *comm, int dead, long pid)
{
    const int cls = MCA_COLL_GPU_ERR_PEER_DEAD_CLASS;
    const int code = atomic_load(&m->dead_code);
    if (code > 0) {
        return code;
    }
    char msg[MPI_MAX_ERROR_STRING];
    snprintf(msg, sizeof(msg),
             "coll/gpu: rank %d (MPI_COMM_WORLD rank %ld, process %ld) of communicator %s died; "
             "%s and every later collective on it fail",
             dead, world_rank_of(comm, dead), pid, comm->c_name, what);
    /* the engine warned already, without world ranks */
    cgpu_log(CGPU_LOG_INFO, "%s", msg + strlen("coll/gpu: "));
    return dead < 0 ? cls : failed_code(m, cls, msg);
}

/* The code of a communicator whose collective gave up waiting (coll_gpu_ras_timeout, or the
 * watchdog's stop): nobody saw a process die (across nodes only the dead rank's node-mates
 * can), but the wait knows whom it waited for; its string names that rank (-1: none known,
 * then the call that timed out). The class is what a timeout maps to: the peer may be alive
 * and only unreachable. */
static int unanswered_code(mca_coll_gpu_module_t *m, const char *what,
                           struct ompi_communicator_t *comm, int peer)
{
    const int cls = mca_coll_gpu_status_to_mpi(CGPU_ERR_TIMEOUT);
    const int code = atomic_load(&m->dead_code);
    if (code > 0) {
        return code;
    }
    const double t = mca_coll_gpu_component.ras_timeout;
    char msg[512];
    if (peer >= 0 && peer < ompi_comm_size(comm)) {
        snprintf(msg, sizeof(msg),
                 "coll/gpu: rank %d (MPI_COMM_WORLD rank %ld, unreachable or dead) of "
                 "communicator %s did not answer (connection lost, or nothing within %.1f s); "
                 "%s and every later collective on it fail",
                 peer, world_rank_of(comm, peer), comm->c_name, t, what);
    } else {
        snprintf(msg, sizeof(msg),
                 "coll/gpu: %s on communicator %s made no progress for %.1f s (a peer "
                 "unreachable, dead or stopped); it and every later collective on it fail",
                 what, comm->c_name, t);
    }
    msg[MPI_MAX_ERROR_STRING - 1] = '\0'; /* what an error string holds (a long name cuts it) */
    cgpu_log(CGPU_LOG_WARN, "%s", msg + strlen("coll/gpu: "));
    return failed_code(m, cls, msg);
}

static int peer_dead_code(const char *what, struct ompi_communicator_t *comm)
{
    mca_coll_gpu_module_t *m = mca_coll_gpu_module_of(comm);
    if (NULL == m) {
        return MCA_COLL_GPU_ERR_PEER_DEAD_CLASS;
    }
    const int code = atomic_load(&m->dead_code);
    if (code > 0) {
        return code;
    }
    long pid = 0;
    cgpu_comm_t *ec = __atomic_load_n(&m->ecomm, __ATOMIC_ACQUIRE);
    const int dead = cgpu_comm_dead_peer(ec, &pid);
    note_dead(comm, dead, pid); /* the process's other communicators refuse too */
    return dead_code_of(m, what, comm, dead, pid);
}

int mca_coll_gpu_refused_look(mca_coll_gpu_module_t *m, const char *what,
                              struct ompi_communicator_t *comm)
{
    const int code = atomic_load(&m->dead_code);
    if (code > 0) {
        return code;
    }
    const unsigned gen = atomic_load(&mca_coll_gpu_dead_gen);
    cgpu_comm_t *ec = __atomic_load_n(&m->ecomm, __ATOMIC_ACQUIRE);
    if (NULL != ec && cgpu_comm_dead_peer(ec, NULL) >= 0) {
        return peer_dead_code(what, comm);
    }
    if (NULL != ec && CGPU_RAS_FAILED == cgpu_comm_ras(ec, CGPU_RAS_STATE)) {
        /* a collective timed out or hit a device error (across nodes: whatever failed once
         * data moved): the engine refuses its calls, and so does every other path; with the
         * rank a wait gave up on, the code that names it (a non-blocking call's worker could
         * not make it) */
        const int peer = cgpu_comm_unanswered(ec);
        if (peer >= 0) {
            return unanswered_code(m, what, comm, peer);
        }
        cgpu_log(CGPU_LOG_INFO,
                 "%s on %s refused: the communicator failed earlier (free it and create a "
                 "new one)",
                 what, comm->c_name);
        return mca_coll_gpu_status_to_mpi(CGPU_ERR_PEER);
    }
    const int n = atomic_load(&dead_count);
    for (int r = 0; n > 0 && r < ompi_comm_size(comm); ++r) {
        const ompi_proc_t *p = ompi_comm_peer_lookup(comm, r);
        for (int i = 0; NULL != p && i < n; ++i) {
            if (dead_procs[i].name.jobid == p->super.proc_name.jobid &&
                dead_procs[i].name.vpid == p->super.proc_name.vpid) {
                return dead_code_of(m, what, comm, r, dead_procs[i].pid);
            }
        }
    }
    atomic_store(&m->dead_gen_seen, gen); /* nothing here: the next death looks again */
    return MPI_SUCCESS;
}

/* The class of what two ranks' calls differ in. */
static int mismatch_class(cgpu_mismatch_field_t f)
{
    switch (f) {
    case CGPU_MISMATCH_SIZE:
        return MPI_ERR_TRUNCATE; /* as the point-to-point based modules answer it */
    case CGPU_MISMATCH_ROOT:
        return MPI_ERR_ROOT;
    case CGPU_MISMATCH_OP:
        return MPI_ERR_OP;
    case CGPU_MISMATCH_DTYPE:
        return MPI_ERR_TYPE;
    case CGPU_MISMATCH_CALL:
    case CGPU_MISMATCH_NONE:
        break;
    }
    return MPI_ERR_ARG;
}

/* A call whose ranks disagreed: the class of what differs, refined by a code whose string
 * names both ranks' values (the same text as the last one reuses that one's code, so a
 * program that repeats its mistake in a loop does not use up the codes). */
static int mismatch_code(const char *what, struct ompi_communicator_t *comm)
{
    mca_coll_gpu_module_t *m = mca_coll_gpu_module_of(comm);
    cgpu_mismatch_t mm;
    if (NULL == m || !cgpu_comm_mismatch(m->ecomm, &mm)) {
        /* a non-blocking call's details were overwritten by a later call of its worker */
        cgpu_log(CGPU_LOG_WARN,
                 "%s on %s: the ranks' calls do not match (details: see the "
                 "log with coll_gpu_verbose 10)",
                 what, comm->c_name);
        return MPI_ERR_ARG;
    }
    const int cls = mismatch_class(mm.field);
    char msg[512];
    snprintf(msg, sizeof(msg),
             "coll/gpu: %s on %s: the ranks' calls differ: %s; nothing was exchanged, the call "
             "fails on every rank",
             what, comm->c_name, mm.text);
    msg[MPI_MAX_ERROR_STRING - 1] = '\0'; /* what an error string holds (a long name cuts it) */
    if (!m->mismatch_told && 0 == ompi_comm_rank(comm)) {
        m->mismatch_told = true; /* the code's string carries it on every rank */
        cgpu_log(CGPU_LOG_WARN, "%s (shown once per communicator)", msg + strlen("coll/gpu: "));
    } else {
        cgpu_log(CGPU_LOG_INFO, "%s", msg + strlen("coll/gpu: "));
    }
    if (m->mismatch_code > 0 && 0 == strcmp(msg, m->mismatch_msg)) {
        return m->mismatch_code;
    }
    int code;
    if (!cgpu_thread_may_call_mpi() || atomic_fetch_add(&codes_made, 1) >= CGPU_ERR_CODES_MAX ||
        MPI_SUCCESS != MPI_Add_error_code(cls, &code) ||
        MPI_SUCCESS != MPI_Add_error_string(code, msg)) {
        return cls;
    }
    m->mismatch_code = code;
    memcpy(m->mismatch_msg, msg, strlen(msg) + 1);
    return code;
}

int mca_coll_gpu_engine_rc(cgpu_status_t st, const char *what, struct ompi_communicator_t *comm)
{
    if (CGPU_ERR_PEER_DEAD == st) {
        return peer_dead_code(what, comm);
    }
    if (CGPU_ERR_MISMATCH == st) {
        return mismatch_code(what, comm);
    }
    mca_coll_gpu_module_t *m = mca_coll_gpu_module_of(comm);
    cgpu_comm_t *ec = NULL != m ? __atomic_load_n(&m->ecomm, __ATOMIC_ACQUIRE) : NULL;
    const int peer = cgpu_comm_unanswered(ec);
    if (NULL != ec && (CGPU_ERR_TIMEOUT == st || (CGPU_ERR_PEER == st && peer >= 0)) &&
        CGPU_RAS_FAILED == cgpu_comm_ras(ec, CGPU_RAS_STATE)) {
        /* a wait gave up and failed the communicator for good */
        atomic_fetch_add(&mca_coll_gpu_dead_gen, 1);
        return unanswered_code(m, what, comm, peer);
    }
    if (CGPU_OK != st) {
        atomic_fetch_add(&mca_coll_gpu_dead_gen, 1); /* the communicator may have failed */
        cgpu_log(CGPU_LOG_WARN, "%s on %s failed in the engine: %s", what, comm->c_name,
                 cgpu_status_string(st));
    }
    return mca_coll_gpu_status_to_mpi(st);
}
