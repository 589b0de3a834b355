/*
 * coll/gpu health monitor for unmodified MPI applications.
 *
 *   LD_PRELOAD=$PREFIX/lib/coll-gpu/libcgpu_monitor.so mpirun ... ./app
 *   (with mpirun: -x LD_PRELOAD=..., or put it in the launcher's environment)
 *
 * Wraps MPI_Init/MPI_Init_thread/MPI_Finalize and the communicator constructors and
 * MPI_Comm_free through the PMPI profiling interface. A thread reads every coll_gpu_*
 * performance variable of every communicator the application made (and of
 * MPI_COMM_WORLD) CGPU_MONITOR_HZ times a second (default 1) and writes one health line
 * per communicator to CGPU_MONITOR_OUT ("-" or unset: stderr; "%r" in the name becomes
 * the rank). The file is created new: where the name exists (a file of an earlier run, a
 * link) it is left alone, a message names it and the lines go to stderr. Reads are MPI_T calls
 * only, which coll/gpu serves with atomic loads, so the monitor cannot disturb the collectives it
 * watches.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MON_MAX_COMMS 256
#define MON_MAX_PVARS 32

typedef struct mon_comm {
    MPI_Comm comm;
    char name[MPI_MAX_OBJECT_NAME];
    int n;
    MPI_T_pvar_handle h[MON_MAX_PVARS];
    int pvar[MON_MAX_PVARS];
} mon_comm_t;

static pthread_mutex_t mon_lock = PTHREAD_MUTEX_INITIALIZER;
static mon_comm_t mon_comms[MON_MAX_COMMS];
static int mon_ncomms;
static MPI_T_pvar_session mon_session;
static int mon_on;
static volatile int mon_stop;
static pthread_t mon_thread;
static FILE *mon_out;
static int mon_rank;
static int mon_bound[MON_MAX_PVARS], mon_is_int[MON_MAX_PVARS], mon_npvars;
static char mon_names[MON_MAX_PVARS][128];

/* every coll_gpu pvar bound to a communicator */
static void find_pvars(void)
{
    int num = 0;
    MPI_T_pvar_get_num(&num);
    for (int i = 0; i < num && mon_npvars < MON_MAX_PVARS; ++i) {
        char nm[128], desc[256];
        int nl = sizeof(nm), dl = sizeof(desc), verb, cls, bind, ro, cont, at;
        MPI_Datatype dt;
        MPI_T_enum en;
        if (MPI_SUCCESS != MPI_T_pvar_get_info(i, nm, &nl, &verb, &cls, &dt, &en, desc, &dl, &bind,
                                               &ro, &cont, &at) ||
            0 != strncmp(nm, "coll_gpu_", 9) || MPI_T_BIND_MPI_COMM != bind) {
            continue;
        }
        mon_bound[mon_npvars] = i;
        mon_is_int[mon_npvars] = (MPI_INT == dt);
        snprintf(mon_names[mon_npvars], sizeof(mon_names[0]), "%s", nm + 9);
        mon_npvars++;
    }
}

static void watch(MPI_Comm comm)
{
    pthread_mutex_lock(&mon_lock);
    if (mon_on && mon_ncomms < MON_MAX_COMMS && MPI_COMM_NULL != comm) {
        mon_comm_t *c = &mon_comms[mon_ncomms];
        memset(c, 0, sizeof(*c));
        c->comm = comm;
        int len = 0;
        PMPI_Comm_get_name(comm, c->name, &len);
        for (int i = 0; i < mon_npvars; ++i) {
            int count = 0;
            if (MPI_SUCCESS ==
                MPI_T_pvar_handle_alloc(mon_session, mon_bound[i], &comm, &c->h[c->n], &count)) {
                c->pvar[c->n++] = i;
            }
        }
        mon_ncomms++;
    }
    pthread_mutex_unlock(&mon_lock);
}

static void unwatch(MPI_Comm comm)
{
    pthread_mutex_lock(&mon_lock);
    for (int k = 0; k < mon_ncomms; ++k) {
        if (mon_comms[k].comm == comm) {
            for (int i = 0; i < mon_comms[k].n; ++i) {
                MPI_T_pvar_handle_free(mon_session, &mon_comms[k].h[i]);
            }
            mon_comms[k] = mon_comms[--mon_ncomms];
            break;
        }
    }
    pthread_mutex_unlock(&mon_lock);
}

static void *mon_main(void *arg)
{
    (void) arg;
    const char *hz = getenv("CGPU_MONITOR_HZ");
    double period = 1.0 / (NULL != hz && atof(hz) > 0 ? atof(hz) : 1.0);
    struct timespec ts = {(time_t) period, (long) ((period - (double) (time_t) period) * 1e9)};
    while (!mon_stop) {
        nanosleep(&ts, NULL);
        pthread_mutex_lock(&mon_lock);
        double now = PMPI_Wtime();
        for (int k = 0; k < mon_ncomms; ++k) {
            mon_comm_t *c = &mon_comms[k];
            fprintf(mon_out, "cgpu-health t=%.3f rank=%d comm=\"%s\"", now, mon_rank, c->name);
            for (int i = 0; i < c->n; ++i) {
                unsigned long long v = 0;
                int iv = 0;
                if (mon_is_int[c->pvar[i]]) {
                    MPI_T_pvar_read(mon_session, c->h[i], &iv);
                    v = (unsigned long long) iv;
                } else {
                    MPI_T_pvar_read(mon_session, c->h[i], &v);
                }
                fprintf(mon_out, " %s=%llu", mon_names[c->pvar[i]], v);
            }
            fputc('\n', mon_out);
        }
        fflush(mon_out);
        pthread_mutex_unlock(&mon_lock);
    }
    return NULL;
}

/*
 * The health lines' stream for CGPU_MONITOR_OUT=@p spec: a new file (O_EXCL, so nothing that
 * exists is overwritten and no link planted under the name is followed), or stderr after a
 * message naming the path and the reason. A name too long is refused, not cut: a cut name
 * would lose the rank and send every rank to one file.
 */
static FILE *open_out(const char *spec, int rank)
{
    char path[PATH_MAX];
    const char *r = strstr(spec, "%r");
    const int n =
        NULL != r ? snprintf(path, sizeof(path), "%.*s%d%s", (int) (r - spec), spec, rank, r + 2)
                  : snprintf(path, sizeof(path), "%s", spec);
    if (n < 0 || (size_t) n >= sizeof(path)) {
        fprintf(stderr,
                "coll/gpu monitor: rank %d: CGPU_MONITOR_OUT (%zu bytes) is too long for a path "
                "(at most %zu bytes); health lines go to stderr. It begins \"%.256s\"\n",
                rank, strlen(spec), sizeof(path) - 1, spec);
        return stderr;
    }
    const int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) {
        const int err = errno;
        fprintf(stderr,
                "coll/gpu monitor: rank %d: cannot create %s: %s%s; health lines go to "
                "stderr\n",
                rank, path, strerror(err),
                EEXIST == err ? " (left as it is: not overwritten, not followed; remove it or "
                                "name another file)"
                              : "");
        return stderr;
    }
    FILE *f = fdopen(fd, "w");
    if (NULL == f) {
        fprintf(stderr,
                "coll/gpu monitor: rank %d: cannot write %s: %s; health lines go to "
                "stderr\n",
                rank, path, strerror(errno));
        close(fd);
        unlink(path);
        return stderr;
    }
    return f;
}

static void mon_start(void)
{
    /* MPI_T at the application's own level: Open MPI 4.1 takes MPI_T_init_thread's level for
     * the whole process (MPI_Query_thread then reports it), and a MULTIPLE here would turn on
     * its locking and MPI_THREAD_MULTIPLE paths for a SINGLE program. The monitor needs no
     * more than that: every MPI_T call it makes, from either thread, holds mon_lock. */
    int level = MPI_THREAD_SINGLE, provided;
    PMPI_Query_thread(&level);
    if (MPI_SUCCESS != MPI_T_init_thread(level, &provided) ||
        MPI_SUCCESS != MPI_T_pvar_session_create(&mon_session)) {
        return;
    }
    PMPI_Comm_rank(MPI_COMM_WORLD, &mon_rank);
    const char *spec = getenv("CGPU_MONITOR_OUT");
    mon_out = stderr;
    if (NULL != spec && '\0' != spec[0] && 0 != strcmp(spec, "-")) {
        mon_out = open_out(spec, mon_rank);
    }
    find_pvars();
    mon_on = 1;
    watch(MPI_COMM_WORLD);
    if (0 != pthread_create(&mon_thread, NULL, mon_main, NULL)) {
        mon_on = 0;
    }
}

int MPI_Init(int *argc, char ***argv)
{
    int rc = PMPI_Init(argc, argv);
    if (MPI_SUCCESS == rc) {
        mon_start();
    }
    return rc;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    int rc = PMPI_Init_thread(argc, argv, required, provided);
    if (MPI_SUCCESS == rc) {
        mon_start();
    }
    return rc;
}

int MPI_Finalize(void)
{
    if (mon_on) {
        mon_stop = 1;
        pthread_join(mon_thread, NULL);
        pthread_mutex_lock(&mon_lock);
        mon_on = 0;
        pthread_mutex_unlock(&mon_lock);
        while (mon_ncomms > 0) {
            unwatch(mon_comms[mon_ncomms - 1].comm);
        }
        MPI_T_pvar_session_free(&mon_session);
        MPI_T_finalize(); /* before MPI_Finalize: Open MPI 4.1 crashes the other way round */
        if (stderr != mon_out) {
            fclose(mon_out);
        }
    }
    return PMPI_Finalize();
}

int MPI_Comm_dup(MPI_Comm comm, MPI_Comm *newcomm)
{
    int rc = PMPI_Comm_dup(comm, newcomm);
    if (MPI_SUCCESS == rc) {
        watch(*newcomm);
    }
    return rc;
}

int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *newcomm)
{
    int rc = PMPI_Comm_split(comm, color, key, newcomm);
    if (MPI_SUCCESS == rc) {
        watch(*newcomm);
    }
    return rc;
}

int MPI_Comm_create(MPI_Comm comm, MPI_Group group, MPI_Comm *newcomm)
{
    int rc = PMPI_Comm_create(comm, group, newcomm);
    if (MPI_SUCCESS == rc) {
        watch(*newcomm);
    }
    return rc;
}

int MPI_Comm_free(MPI_Comm *comm)
{
    unwatch(*comm); /* handles go before the communicator, as MPI_T requires */
    return PMPI_Comm_free(comm);
}
