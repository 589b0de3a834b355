/*
 * Example MPI_T client: runs a few collectives, then prints the coll/gpu health of
 * MPI_COMM_WORLD on every rank (every per-communicator coll_gpu_* pvar, by name).
 *   mpirun -np 4 --mca coll gpu,tuned,libnbc,basic,self [--mca coll_gpu_backend host] examples/health
 */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    int provided, rank, size, num;
    MPI_Init(&argc, &argv);
    MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_T_pvar_session s;
    MPI_T_pvar_session_create(&s);
    MPI_T_pvar_get_num(&num);
    char line[2048];
    int len = snprintf(line, sizeof(line), "rank %d:", rank);
    MPI_Comm world = MPI_COMM_WORLD;
    /* handles first: counters read as their change since the handle was allocated */
    MPI_T_pvar_handle hs[64];
    int idx[64], is_int[64], nh = 0;
    for (int i = 0; i < num && nh < 64; ++i) {
        char nm[128], desc[256];
        int nl = sizeof(nm), dl = sizeof(desc), verb, cls, bind, ro, cont, at, cnt;
        MPI_Datatype dt;
        MPI_T_enum en;
        MPI_T_pvar_get_info(i, nm, &nl, &verb, &cls, &dt, &en, desc, &dl, &bind, &ro, &cont, &at);
        if (0 == strncmp(nm, "coll_gpu_", 9) && MPI_T_BIND_MPI_COMM == bind &&
            MPI_SUCCESS == MPI_T_pvar_handle_alloc(s, i, &world, &hs[nh], &cnt)) {
            idx[nh] = i;
            is_int[nh++] = (MPI_INT == dt);
        }
    }
    float x[1000] = {0}, y[1000];
    for (int i = 0; i < 10; ++i) {
        MPI_Allreduce(x, y, 1000, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    }
    for (int k = 0; k < nh; ++k) {
        char nm[128], desc[256];
        int nl = sizeof(nm), dl = sizeof(desc), verb, cls, bind, ro, cont, at;
        MPI_Datatype dt;
        MPI_T_enum en;
        MPI_T_pvar_get_info(idx[k], nm, &nl, &verb, &cls, &dt, &en, desc, &dl, &bind, &ro, &cont,
                            &at);
        unsigned long long v = 0;
        int iv = 0;
        if (is_int[k]) {
            MPI_T_pvar_read(s, hs[k], &iv);
            v = (unsigned long long) iv;
        } else {
            MPI_T_pvar_read(s, hs[k], &v);
        }
        if (len < (int) sizeof(line) - 64) {
            len += snprintf(line + len, sizeof(line) - (size_t) len, " %s=%llu", nm + 9, v);
        }
        MPI_T_pvar_handle_free(s, &hs[k]);
    }
    printf("%s\n", line);
    MPI_T_pvar_session_free(&s);
    MPI_T_finalize();
    MPI_Finalize();
    return 0;
}
