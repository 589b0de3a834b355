/*
 * Faults of one peer process, and what every other rank must see.
 *
 *   test_fault kill <victim rank> <result dir> [comm|world [count]]
 * A peer dies in the middle of a loop of large allreduces of count ints (default 1 Mi; a count
 * the ranks of a node do not divide takes the uneven parts' paths), each call that succeeds
 * checked against the host's sum (a thread of the victim kills its process with SIGKILL 300 ms
 * after the loop started): every survivor must get an MPI error
 * back (no hang) in bounded time, and the failed communicator must keep refusing calls with
 * an error of the same class, MPI_Barrier included (a collective coll/gpu carries no data
 * for: the previous module's barrier would wait for the dead process for ever). With
 * "world", MPI_Barrier on MPI_COMM_WORLD and on a dup of it made before the death (never
 * used by the engine since) must fail the same way, their strings naming the dead rank.
 * Each survivor writes <result dir>/survivor.<rank>:
 *   rank R calls C failed F took T again_failed A again_took T2 same_class S
 *   barrier_comm F T S N [barrier_world F T S N barrier_dup F T S N]
 *   wrong W first_call C first_element E error <string>
 * (the failing call's duration, the next call's; each barrier's failed, duration, same class
 * as the first error, and whether its string names the dead rank; the calls that returned
 * MPI_SUCCESS with a wrong sum, the first of them and its first wrong element;
 * MPI_Error_string of the first error), then leaves with _exit (MPI_Finalize would wait for the dead process). A
 * barrier that has not returned after 60 s makes the survivor write "rank R barrier on X
 * hung" instead and leave. The driver (test/run_all.sh) bounds T and the barriers' times and
 * checks that the string names the dead rank. Run under mpirun --enable-recovery, so that
 * the launcher does not kill the survivors first.
 *
 *   test_fault stall <victim rank> <result dir>
 * A peer stops (SIGSTOP) just before a large MPI_Bcast (root 0; the victim must not be 0)
 * and is let go on (SIGCONT, from a thread of rank 0) 2.5 s later: with coll_gpu_ras_timeout
 * 1 the watchdog of every other rank must report that bcast, by its number on the
 * communicator, with the victim as the one rank not arrived; the call must then complete
 * with the root's data. Each rank captures its own stderr (the watchdog's lines) meanwhile
 * and writes <result dir>/stall.<rank>: "rank R ok O" and the reason when not ok.
 *
 *   test_fault setup <victim rank> <result dir>
 * The victim is killed (SIGKILL) while every other rank waits inside its first collective on
 * a new communicator, in the engine's set-up. Run without --enable-recovery: the launcher then
 * kills the survivors where they wait, as it does to a real job. Every rank writes its pid
 * to <result dir>/pid.<rank> first, and each survivor <result dir>/entered.<rank> just
 * before the collective; the victim dies once all have entered and a moment has passed. The
 * driver checks that no process of the job left a segment name in /dev/shm.
 *
 * Built with -DCGPU_TEST_CUDA (test/gpu/test_cuda_fault), the kill and stall cases' buffers
 * are device memory (mt_twin.h: filled and checked on the host, device twins handed to MPI);
 * without a GPU it prints "skipped: no GPU" and exits 77. The set-up case's one int stays
 * on the host: what it tests happens before any buffer is read.
 */
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <mpi.h>

#include "../proc_state.h"
#include "mt_twin.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

static void write_file(const char *dir, const char *what, int rank, long value)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s.%d", dir, what, rank);
    FILE *f = fopen(path, "w");
    if (NULL != f) {
        fprintf(f, "%ld\n", value);
        fclose(f);
    }
}

/* The victim of the set-up case: dies once every survivor has written entered.<rank>
 * (at most 30 s) and 500 ms more have passed, so that each survivor is inside the set-up. */
static void die_when_all_entered(const char *dir, int rank, int size)
{
    for (int waited = 0; waited < 3000; ++waited) {
        int entered = 0;
        for (int r = 0; r < size; ++r) {
            char path[4096];
            snprintf(path, sizeof(path), "%s/entered.%d", dir, r);
            entered += (r != rank && 0 == access(path, F_OK));
        }
        if (entered == size - 1) {
            break;
        }
        usleep(10 * 1000);
    }
    usleep(500 * 1000);
    raise(SIGKILL);
}

/* The set-up case: see the top of this file. */
static int run_setup(MPI_Comm comm, int rank, int size, int victim, const char *dir)
{
    int v = rank;
    if (rank == victim) {
        die_when_all_entered(dir, rank, size);
    }
    write_file(dir, "entered", rank, 1);
    MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT, MPI_SUM, comm);
    /* not reached while the victim is dead: the launcher ends the job */
    fprintf(stderr, "test_fault: rank %d: the collective returned without rank %d\n", rank, victim);
    _exit(4);
}

static void *killer(void *arg)
{
    (void) arg;
    usleep(300 * 1000);
    raise(SIGKILL);
    return NULL;
}

/* A barrier of the kill case that never returns: the survivor says so and leaves. */
static const char *_Atomic barrier_on;
static int hang_fd = -1;

static void *hang_guard(void *arg)
{
    (void) arg;
    const char *seen = NULL;
    for (int waited = 0;; ++waited) {
        const char *now_on = barrier_on;
        if (now_on != seen) {
            seen = now_on;
            waited = 0;
        }
        if (NULL != seen && waited >= 600) { /* 60 s in one barrier */
            dprintf(hang_fd, "barrier on %s hung\n", seen);
            _exit(5);
        }
        usleep(100 * 1000);
    }
    return NULL;
}

/* MPI_Barrier on @p c after the death: " barrier_<name> failed took same_class names" */
static void barrier_after(MPI_Comm c, const char *name, int cls0, int victim, char *out, size_t n)
{
    barrier_on = name;
    const double t0 = now();
    const int rc = MPI_Barrier(c);
    const double took = now() - t0;
    barrier_on = NULL;
    char err[MPI_MAX_ERROR_STRING] = "", want[64];
    int len = 0, cls = -1;
    if (MPI_SUCCESS != rc) {
        MPI_Error_class(rc, &cls);
        MPI_Error_string(rc, err, &len);
    }
    snprintf(want, sizeof(want), "rank %d (MPI_COMM_WORLD rank %d,", victim, victim);
    const size_t used = strlen(out);
    snprintf(out + used, n - used, " barrier_%s %d %.3f %d %d", name, MPI_SUCCESS != rc, took,
             cls == cls0, NULL != strstr(err, want));
}

/* The elements of the result of run_kill's allreduce that differ from the host's sum; the
 * first one's index in @p first. */
static long wrong_elements(const int *r, int n, int size, long *first)
{
    long wrong = 0;
    for (int i = 0; i < n; ++i) {
        const int want = size * i + size * (size - 1) / 2; /* sum over ranks of rank + i */
        if (r[i] != want && 0 == wrong++) {
            *first = i;
        }
    }
    return wrong;
}

static int run_kill(MPI_Comm comm, int rank, int size, int victim, const char *dir, bool world,
                    int n)
{
    int *a = mt_twin_alloc(sizeof(int) * (size_t) n);
    int *r = mt_twin_alloc(sizeof(int) * (size_t) n);
    for (int i = 0; i < n; ++i) {
        a[i] = rank + i;
    }
    mt_push(a);
    /* one good call first: the communicator is set up on every rank */
    int rc = MPI_Allreduce(MT_D(a), MT_D(r), n, MPI_INT, MPI_SUM, comm);
    if (MPI_SUCCESS != rc) {
        fprintf(stderr, "test_fault: rank %d: the first allreduce failed\n", rank);
        _exit(3);
    }
    /* the dup whose barrier comes after the death; MPI_COMM_WORLD's errors come back too */
    MPI_Comm dup = MPI_COMM_NULL;
    if (world) {
        MPI_Comm_dup(MPI_COMM_WORLD, &dup);
        MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN);
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == victim) {
        pthread_t t;
        pthread_create(&t, NULL, killer, NULL);
    }
    double t0 = now(), took = 0;
    long calls = 0, wrong_calls = 0, first_call = -1, first_elem = -1;
    char err[MPI_MAX_ERROR_STRING] = "";
    while (now() - t0 < 120) {
        const double c0 = now();
        rc = MPI_Allreduce(MT_D(a), MT_D(r), n, MPI_INT, MPI_SUM, comm);
        took = now() - c0;
        ++calls;
        if (MPI_SUCCESS != rc) {
            int len = 0;
            MPI_Error_string(rc, err, &len);
            break;
        }
        /* a call that succeeded has the whole sum, even the one the death cut short
         * elsewhere: a partial result handed on as a success is the worst outcome */
        mt_pull(r);
        long first = -1;
        if (wrong_elements(r, n, size, &first) > 0 && 0 == wrong_calls++) {
            first_call = calls;
            first_elem = first;
        }
    }
    /* the failed communicator keeps refusing, at once, with an error of the same class */
    const double c1 = now();
    int rc2 = MPI_Allreduce(MT_D(a), MT_D(r), 16, MPI_INT, MPI_SUM, comm);
    const double again = now() - c1;
    int cls = -1, cls2 = -2;
    if (MPI_SUCCESS != rc && MPI_SUCCESS != rc2) {
        MPI_Error_class(rc, &cls);
        MPI_Error_class(rc2, &cls2);
    }
    char path[4096];
    snprintf(path, sizeof(path), "%s/survivor.%d", dir, rank);
    FILE *f = fopen(path, "w");
    if (NULL == f) {
        _exit(3);
    }
    /* the barriers, watched: a hang is written where the result would be */
    hang_fd = fileno(f);
    dprintf(hang_fd, "rank %d ", rank);
    pthread_t guard;
    pthread_create(&guard, NULL, hang_guard, NULL);
    char barriers[256] = "";
    barrier_after(comm, "comm", cls, victim, barriers, sizeof(barriers));
    if (world) {
        barrier_after(MPI_COMM_WORLD, "world", cls, victim, barriers, sizeof(barriers));
        barrier_after(dup, "dup", cls, victim, barriers, sizeof(barriers));
    }
    fprintf(f,
            "calls %ld failed %d took %.3f again_failed %d again_took %.3f same_class %d%s "
            "wrong %ld first_call %ld first_element %ld error %s\n",
            calls, MPI_SUCCESS != rc, took, MPI_SUCCESS != rc2, again, cls == cls2, barriers,
            wrong_calls, first_call, first_elem, err);
    fclose(f);
    fflush(stdout);
    fflush(stderr);
    _exit(0);
}

/* ---- stall ---- */

static void *resumer(void *arg)
{
    const pid_t pid = *(const pid_t *) arg;
    for (int i = 0; i < 10000 && 'T' != test_proc_state(pid); ++i) {
        usleep(1000);
    }
    usleep(2500 * 1000); /* past coll_gpu_ras_timeout (1 s) and a watchdog period */
    kill(pid, SIGCONT);
    return NULL;
}

enum { STALL_WARMUP = 3, STALL_BYTES = 8 << 20 };

static unsigned char pattern(size_t i, int call)
{
    return (unsigned char) (i * 131u + (unsigned) call * 7u + 1u);
}

static int run_stall(MPI_Comm comm, int rank, int size, int victim, const char *dir)
{
    unsigned char *buf = mt_twin_alloc(STALL_BYTES);
    char path[4096], why[512] = "";
    int ok = 1;
    /* the pids, so that rank 0 can let the victim go on */
    int *pids = malloc(sizeof(int) * (size_t) size);
    int mine = (int) getpid();
    MPI_Allgather(&mine, 1, MPI_INT, pids, 1, MPI_INT, MPI_COMM_WORLD);
    for (int call = 1; call <= STALL_WARMUP; ++call) {
        for (size_t i = 0; i < STALL_BYTES; ++i) {
            buf[i] = 0 == rank ? pattern(i, call) : 0;
        }
        mt_push(buf);
        if (MPI_SUCCESS != MPI_Bcast(MT_D(buf), STALL_BYTES, MPI_BYTE, 0, comm)) {
            fprintf(stderr, "test_fault: rank %d: warm-up bcast %d failed\n", rank, call);
            _exit(3);
        }
    }
    /* this rank's stderr (the watchdog's lines) into a file for the stalled call */
    snprintf(path, sizeof(path), "%s/stderr.%d", dir, rank);
    fflush(stderr);
    const int saved = dup(2);
    FILE *cap = fopen(path, "w+");
    if (NULL == cap || saved < 0 || dup2(fileno(cap), 2) < 0) {
        fprintf(stderr, "test_fault: rank %d: cannot capture stderr\n", rank);
        _exit(3);
    }
    const int call = STALL_WARMUP + 1; /* the stalled bcast's number on the communicator */
    for (size_t i = 0; i < STALL_BYTES; ++i) {
        buf[i] = 0 == rank ? pattern(i, call) : 0;
    }
    mt_push(buf);
    MPI_Barrier(MPI_COMM_WORLD);
    pthread_t t;
    if (0 == rank) {
        pthread_create(&t, NULL, resumer, &pids[victim]);
    }
    if (rank == victim) {
        raise(SIGSTOP);
    }
    const double c0 = now();
    const int rc = MPI_Bcast(MT_D(buf), STALL_BYTES, MPI_BYTE, 0, comm);
    const double took = now() - c0;
    mt_pull(buf);
    if (0 == rank) {
        pthread_join(t, NULL);
    }
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    if (MPI_SUCCESS != rc) {
        ok = 0;
        snprintf(why, sizeof(why), "the stalled bcast failed (a stopped peer is no error)");
    }
    for (size_t i = 0; ok && i < STALL_BYTES; ++i) {
        if (buf[i] != pattern(i, call)) {
            ok = 0;
            snprintf(why, sizeof(why), "byte %zu is %u, the root sent %u", i, buf[i],
                     pattern(i, call));
        }
    }
    /* the watchdog's line: this collective, by its number, and exactly the victim missing */
    char want_kind[64], want_missing[64], line[1024], found[1024] = "";
    snprintf(want_kind, sizeof(want_kind), "RAS: bcast #%d ", call);
    snprintf(want_missing, sizeof(want_missing), " 1 rank(s) not arrived: %d;", victim);
    rewind(cap);
    int lines = 0;
    while (NULL != fgets(line, sizeof(line), cap)) {
        if (NULL != strstr(line, "RAS: ") && NULL != strstr(line, "no progress")) {
            ++lines;
            if (NULL != strstr(line, want_kind) && NULL != strstr(line, want_missing)) {
                snprintf(found, sizeof(found), "%s", line);
            }
        }
    }
    fclose(cap);
    if (ok && rank != victim && '\0' == found[0]) {
        ok = 0;
        snprintf(why, sizeof(why),
                 "no watchdog line with \"%s\" and \"%s\" (%d watchdog line(s); see %.200s)",
                 want_kind, want_missing, lines, path);
    }
    if (ok && rank == victim && lines > 0) {
        ok = 0; /* it was stopped, not waiting: it has nothing to report */
        snprintf(why, sizeof(why), "the stopped rank reported %d stall(s) (see %.200s)", lines,
                 path);
    }
    snprintf(path, sizeof(path), "%s/stall.%d", dir, rank);
    FILE *f = fopen(path, "w");
    if (NULL != f) {
        fprintf(f, "rank %d ok %d took %.3f %s%s", rank, ok, took, why,
                '\0' != found[0] ? "\n  " : "\n");
        fputs(found, f);
        fclose(f);
    }
    free(pids);
    mt_twin_free(buf);
    return ok ? 0 : 1;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    mt_twin_init(); /* the device build: this rank's GPU, or "skipped: no GPU" and exit 77 */
    const int stall = argc >= 4 && 0 == strcmp(argv[1], "stall");
    const int setup = argc >= 4 && 0 == strcmp(argv[1], "setup");
    const bool world = argc >= 5 && 0 == strcmp(argv[4], "world");
    const int count = argc >= 6 ? atoi(argv[5]) : 1 << 20; /* 4 MiB of ints per call */
    if (argc < 4 || (!stall && !setup && 0 != strcmp(argv[1], "kill")) ||
        (argc >= 5 && !world && 0 != strcmp(argv[4], "comm")) || count < 1 ||
        count > (1 << 26)) {
        if (0 == rank) {
            fprintf(stderr, "usage: test_fault kill|stall|setup <victim rank> <result dir> "
                            "[comm|world [count]]\n");
        }
        MPI_Finalize();
        return 2;
    }
    const int victim = atoi(argv[2]);
    const char *dir = argv[3];
    if (victim < 0 || victim >= size || (stall && 0 == victim)) {
        if (0 == rank) {
            fprintf(stderr, "test_fault: victim %d out of range (stall: not the root 0)\n", victim);
        }
        MPI_Finalize();
        return 2;
    }
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    if (setup) {
        write_file(dir, "pid", rank, (long) getpid());
        return run_setup(comm, rank, size, victim, dir);
    }
    if (!stall) {
        return run_kill(comm, rank, size, victim, dir, world, count);
    }
    const int bad = run_stall(comm, rank, size, victim, dir);
    MPI_Comm_free(&comm);
    MPI_Finalize();
    return bad;
}
