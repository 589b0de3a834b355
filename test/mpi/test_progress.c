/*
 * MPI's progress rule while a rank waits inside one of our collectives.
 *
 * World rank `snd` posts an MPI_Isend of 4 MiB and enters a collective; world rank `rcv`
 * first sits in a blocking MPI_Recv of that message and enters the collective after it.
 * The message goes in fragments that only the sender's progress pushes (the shared-memory
 * single copy, with which the receiver would pull it alone, is turned off here; over TCP
 * it is always so). If the engine's waits did not run Open MPI's progress, `snd` would wait
 * for `rcv` in the collective and `rcv` for `snd` in the receive, for ever: the alarm below
 * then fails the test with a message instead of a hang.
 *
 * Every collective the engine runs (allreduce, reduce, reduce_scatter_block, bcast,
 * allgather, alltoall, and an iallreduce waited for at once), one element and past a ring
 * slot, on the world and on a reordered split of it, with the roles moving round the ranks;
 * every result checked against values computed here, the received message too; pvars: the
 * engine ran the collectives.
 * Built with -DCGPU_TEST_CUDA (test/gpu/test_cuda_progress) the collectives take device
 * buffers: the small ones wait in the resident kernel's loop, the larger ones in the polled
 * stream wait (the default settings: both run progress once the wait lasts).
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mt_twin.h"
#include "mpitest.h"

#define MSG_BYTES (4u << 20)
#define BIG 70001 /* elements: 280 KB of ints, past a 128 KiB ring slot */

static int wrank, wsize;

static void on_alarm(int sig)
{
    static const char msg[] = "test_progress: no progress for 120 s: a rank waits in a "
                              "collective while its peer waits in MPI_Recv for it (hang)\n";
    (void) sig;
    (void) !write(2, msg, sizeof(msg) - 1);
    _exit(3);
}

static int v(int salt, int r, long i)
{
    return (int) ((r * 7919L + i * 13L + salt * 101L) % 1000) - 500;
}

static unsigned char mbyte(int salt, size_t i)
{
    return (unsigned char) (i * 31u + (size_t) salt * 7u + 1u);
}

/* The point-to-point half of round @p salt: snd's Isend before the collective, rcv's
 * blocking Recv before it; snd completes its request after. */
typedef struct pt {
    int snd, rcv;
    unsigned char *buf;
    MPI_Request req;
} pt_t;

static void pt_begin(pt_t *p, int salt)
{
    p->req = MPI_REQUEST_NULL;
    if (wsize < 2) {
        return;
    }
    p->snd = salt % wsize;
    p->rcv = (p->snd + 1 + salt / wsize % (wsize - 1)) % wsize;
    if (wrank == p->snd) {
        for (size_t i = 0; i < MSG_BYTES; ++i) {
            p->buf[i] = mbyte(salt, i);
        }
        MT_CHECK_MPI(MPI_Isend(p->buf, (int) MSG_BYTES, MPI_BYTE, p->rcv, salt, MPI_COMM_WORLD,
                               &p->req));
    } else if (wrank == p->rcv) {
        memset(p->buf, 0, MSG_BYTES);
        MT_CHECK_MPI(MPI_Recv(p->buf, (int) MSG_BYTES, MPI_BYTE, p->snd, salt, MPI_COMM_WORLD,
                              MPI_STATUS_IGNORE));
        size_t bad = MSG_BYTES;
        for (size_t i = 0; i < MSG_BYTES && MSG_BYTES == bad; ++i) {
            bad = p->buf[i] == mbyte(salt, i) ? bad : i;
        }
        MT_CHECK(MSG_BYTES == bad, "round %d: byte %zu of the message from rank %d is wrong", salt,
                 bad, p->snd);
    }
}

static void pt_end(pt_t *p)
{
    if (wsize >= 2 && wrank == p->snd) {
        MT_CHECK_MPI(MPI_Wait(&p->req, MPI_STATUS_IGNORE));
    }
}

/* One collective of kind @p k with @p n elements on @p comm, between the two halves. */
static void round_of(MPI_Comm comm, const char *label, int k, long n, int salt, pt_t *p)
{
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    const long sn = (2 == k || 5 == k) ? n * size : n; /* elements this rank sends */
    const long rn = (4 == k || 5 == k) ? n * size : n; /* ... and receives */
    int *s = mt_twin_alloc(sizeof(int) * (size_t) sn);
    int *r = mt_twin_alloc(sizeof(int) * (size_t) rn);
    const int root = salt % size;
    const char *names[] = {"allreduce", "reduce", "reduce_scatter_block", "bcast", "allgather",
                           "alltoall", "iallreduce + wait"};

    for (long i = 0; i < sn; ++i) {
        s[i] = v(salt, rank, i);
    }
    for (long i = 0; i < rn; ++i) {
        r[i] = -77777;
    }
    if (3 == k) {
        for (long i = 0; i < n; ++i) {
            r[i] = rank == root ? v(salt, root, i) : -77777;
        }
    }
    mt_push(s);
    mt_push(r);
    pt_begin(p, salt);
    switch (k) {
    case 0:
        MT_CHECK_MPI(MPI_Allreduce(MT_D(s), MT_D(r), (int) n, MPI_INT, MPI_SUM, comm));
        break;
    case 1:
        MT_CHECK_MPI(MPI_Reduce(MT_D(s), MT_D(r), (int) n, MPI_INT, MPI_SUM, root, comm));
        break;
    case 2:
        MT_CHECK_MPI(MPI_Reduce_scatter_block(MT_D(s), MT_D(r), (int) n, MPI_INT, MPI_SUM, comm));
        break;
    case 3:
        MT_CHECK_MPI(MPI_Bcast(MT_D(r), (int) n, MPI_INT, root, comm));
        break;
    case 4:
        MT_CHECK_MPI(MPI_Allgather(MT_D(s), (int) n, MPI_INT, MT_D(r), (int) n, MPI_INT, comm));
        break;
    case 5:
        MT_CHECK_MPI(MPI_Alltoall(MT_D(s), (int) n, MPI_INT, MT_D(r), (int) n, MPI_INT, comm));
        break;
    default: { /* the worker runs it; this thread's MPI_Wait progresses */
        MPI_Request q;
        MT_CHECK_MPI(MPI_Iallreduce(MT_D(s), MT_D(r), (int) n, MPI_INT, MPI_SUM, comm, &q));
        MT_CHECK_MPI(MPI_Wait(&q, MPI_STATUS_IGNORE));
        break;
    }
    }
    pt_end(p);
    mt_pull(r);

    /* the reference */
    long bad = -1, got = 0, want = 0;
    const int has = 1 != k || rank == root;
    for (long i = 0; has && i < rn && bad < 0; ++i) {
        long e = 0;
        if (k <= 1 || 6 == k) {
            for (int q = 0; q < size; ++q) {
                e += v(salt, q, i);
            }
        } else if (2 == k) { /* my block of everyone's n * size elements */
            for (int q = 0; q < size; ++q) {
                e += v(salt, q, (long) rank * n + i);
            }
        } else if (3 == k) {
            e = v(salt, root, i);
        } else if (4 == k) { /* block q: q's n elements */
            e = v(salt, (int) (i / n), i % n);
        } else { /* block q: q's block for me */
            e = v(salt, (int) (i / n), (long) rank * n + i % n);
        }
        if (r[i] != e) {
            bad = i;
            got = r[i];
            want = e;
        }
    }
    MT_CHECK(bad < 0, "%s on %s, %ld elements, round %d: [%ld] = %ld, expected %ld", names[k],
             label, n, salt, bad, got, want);
    mt_twin_free(s);
    mt_twin_free(r);
}

static void suite(MPI_Comm comm, const char *label, int *salt, unsigned char *msg)
{
    mt_pvars_t pv;
    long calls = 0;
    pt_t p = {.buf = msg};
    const long ns[] = {1, BIG};

    mt_pvars_open(&pv, comm, label);
    mt_pvars_mark(&pv);
    for (int k = 0; k < 7; ++k) {
        for (size_t j = 0; j < sizeof(ns) / sizeof(ns[0]); ++j) {
            round_of(comm, label, k, ns[j], ++*salt, &p);
            ++calls;
        }
    }
    MT_EXPECT_PATH(&pv, calls, MT_PATH_ENGINE, "collectives entered while a peer sat in MPI_Recv");
    mt_pvars_close(&pv);
}

int main(int argc, char **argv)
{
    /* the rendezvous must need the sender's progress; the user's own choice wins */
    setenv("OMPI_MCA_btl_vader_single_copy_mechanism", "none", 0);
    setenv("OMPI_MCA_btl_sm_single_copy_mechanism", "none", 0);
    signal(SIGALRM, on_alarm);
    alarm(120);
    mt_init(&argc, &argv, MT_ON_DEVICE ? "test_cuda_progress" : "test_progress");
    mt_twin_init();
    wrank = mt_world_rank();
    wsize = mt_world_size();
    unsigned char *msg = mt_xmalloc(MSG_BYTES);
    int salt = 0;
    MPI_Comm rev;

    suite(MPI_COMM_WORLD, "world", &salt, msg);
    MT_CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, 0, wsize - wrank, &rev));
    suite(rev, "reordered split", &salt, msg);
    MT_CHECK_MPI(MPI_Comm_free(&rev));
    free(msg);
    alarm(0);
    return mt_finalize();
}
