/*
 * Alltoall at scale (the known failure: a custom alltoall on 32 GPUs dying in connection
 * set-up with "Resource temporarily unavailable"). Run with many ranks (the driver uses
 * 16, oversubscribed): CGPU_TEST_A2A_ITERS alltoalls (default 200) of varying sizes on
 * world and on a dup, every result checked; afterwards each process holds no more file
 * descriptors than before, at most one more thread (the RAS watchdog), and exactly one
 * shared-memory mapping per rank of each live engine communicator: resources grow with
 * the peers actually used, not with the calls.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpitest.h"

static long count_dir(const char *path)
{
    long n = 0;
    DIR *d = opendir(path);
    if (NULL == d) {
        return -1;
    }
    while (NULL != readdir(d)) {
        ++n;
    }
    closedir(d);
    return n - 2;
}

static long count_cgpu_maps(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[512];
    long n = 0;
    while (NULL != f && NULL != fgets(line, sizeof(line), f)) {
        n += NULL != strstr(line, "/cgpu-");
    }
    if (NULL != f) {
        fclose(f);
    }
    return n;
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv, "test_a2a_scale");
    const int rank = mt_world_rank(), size = mt_world_size();
    const long iters = getenv("CGPU_TEST_A2A_ITERS") ? atol(getenv("CGPU_TEST_A2A_ITERS")) : 200;
    const long fds_start = count_dir("/proc/self/fd"), threads_start = count_dir("/proc/self/task");
    MPI_Comm dup;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    /* one alltoall on each communicator first: they set up lazily (and the cuda backend
     * starts the CUDA runtime, with its own threads and descriptors); what they built must
     * be bounded by the peers, and nothing may grow after that */
    {
        int *w = mt_xmalloc(sizeof(int) * (size_t) size * 2);
        for (int k = 0; k < 2; ++k) {
            MT_CHECK_MPI(MPI_Alltoall(w, 1, MPI_INT, w + size, 1, MPI_INT, k ? dup : MPI_COMM_WORLD));
        }
        free(w);
    }
    const long fds0 = count_dir("/proc/self/fd"), threads0 = count_dir("/proc/self/task");
    /* set-up: a few descriptors per peer and per communicator, plus a fixed allowance for
     * the CUDA runtime where it starts; threads: the watchdog plus the runtime's own */
    MT_CHECK(fds0 - fds_start <= 48 + 4L * size, "set-up of 2 communicators of %d ranks took %ld "
             "file descriptors", size, fds0 - fds_start);
    MT_CHECK(threads0 - threads_start <= 6, "set-up started %ld threads", threads0 - threads_start);
    mt_pvars_t pv;
    mt_pvars_open(&pv, dup, "dup");
    mt_pvars_mark(&pv);
    long calls = 0;
    for (long it = 0; it < iters; ++it) {
        MPI_Comm c = (it % 2) ? dup : MPI_COMM_WORLD;
        int per = 1 + (int) ((it * 37) % 2000); /* ints per peer */
        int *s = mt_xmalloc(sizeof(int) * (size_t) per * (size_t) size);
        int *r = mt_xmalloc(sizeof(int) * (size_t) per * (size_t) size);
        for (int p = 0; p < size; ++p) {
            for (int k = 0; k < per; ++k) {
                s[(size_t) p * per + k] = (rank * 100 + p) * 10000 + k + (int) it;
            }
        }
        MT_CHECK_MPI(MPI_Alltoall(s, per, MPI_INT, r, per, MPI_INT, c));
        for (int p = 0; p < size; ++p) {
            int k = per - 1;
            MT_CHECK(r[(size_t) p * per + k] == (p * 100 + rank) * 10000 + k + (int) it &&
                         r[(size_t) p * per] == (p * 100 + rank) * 10000 + (int) it,
                     "iteration %ld: block from %d wrong", it, p);
        }
        calls += (it % 2);
        free(s);
        free(r);
    }
    MT_EXPECT_PATH(&pv, calls, MT_PATH_ENGINE, "alltoall on the dup");
    const long fds1 = count_dir("/proc/self/fd"), threads1 = count_dir("/proc/self/task");
    const long maps = count_cgpu_maps();
    MT_CHECK(fds1 <= fds0, "file descriptors grew from %ld to %ld over %ld alltoalls", fds0, fds1,
             iters);
    MT_CHECK(threads1 <= threads0, "threads grew from %ld to %ld", threads0, threads1);
    if (size > 1) { /* world and the dup: one mapping per rank each */
        MT_CHECK(maps == 2L * size, "%ld coll/gpu mappings for 2 communicators of %d ranks", maps,
                 size);
    }
    if (0 == rank) {
        printf("alltoall scale: %d ranks, %ld alltoalls: fds %ld (set-up %+ld) -> %ld, threads %ld "
               "(set-up %+ld) -> %ld, cgpu mappings %ld (2 communicators)\n", size, iters, fds0,
               fds0 - fds_start, fds1, threads0, threads0 - threads_start, threads1, maps);
    }
    mt_pvars_close(&pv);
    MPI_Comm_free(&dup);
    return mt_finalize();
}
