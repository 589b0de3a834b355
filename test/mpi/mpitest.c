/*
 * mpitest.c - shared helpers for the coll/gpu MPI integration tests (see mpitest.h).
 */
#include "mpitest.h"

#include <dirent.h>
#include <execinfo.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Printing every failure of a broken build floods the log; the count stays exact. */
#define MT_MAX_PRINTED_FAILURES 25

static struct {
    const char *prog;
    int rank;
    int size;
    int verbose;
    int skip_pvars;
    long max_print;
    long checks;
    long failures;
    long pvar_checks;
    long pvar_skipped;
    int mpit_ok;
    MPI_T_pvar_session session;
    int pvar_index[2]; /* -1 when not found */
    int pvar_bytes[2]; /* size of one value as the pvar declares it */
    MPI_Datatype pvar_type[2];
} mt = {.pvar_index = {-1, -1}};

static const char *const pvar_names[2] = {MT_PVAR_ENGINE_NAME, MT_PVAR_FALLBACK_NAME};

int mt_world_rank(void)
{
    return mt.rank;
}

int mt_world_size(void)
{
    return mt.size;
}

int *mt_world_ranks(MPI_Comm comm)
{
    int size;
    MPI_Comm_size(comm, &size);
    MPI_Group g, wg;
    MPI_Comm_group(comm, &g);
    MPI_Comm_group(MPI_COMM_WORLD, &wg);
    int *ranks = mt_xmalloc(sizeof(int) * (size_t) size),
        *wr = mt_xmalloc(sizeof(int) * (size_t) size);
    for (int i = 0; i < size; ++i) {
        ranks[i] = i;
    }
    MPI_Group_translate_ranks(g, size, ranks, wg, wr);
    free(ranks);
    MPI_Group_free(&g);
    MPI_Group_free(&wg);
    return wr;
}

long mt_failures(void)
{
    return mt.failures;
}

int mt_pvars_available(void)
{
    return mt.mpit_ok && mt.pvar_index[0] >= 0 && mt.pvar_index[1] >= 0;
}

const char *mt_mpi_errstr(int rc)
{
    static char buf[MPI_MAX_ERROR_STRING + 1];
    int len = 0;

    if (MPI_SUCCESS != MPI_Error_string(rc, buf, &len)) {
        snprintf(buf, sizeof(buf), "unknown MPI error %d", rc);
    }
    return buf;
}

static void vreport(const char *file, int line, const char *fmt, va_list ap)
{
    char msg[1024];

    vsnprintf(msg, sizeof(msg), fmt, ap);
    printf("[%s rank %d/%d] FAIL %s:%d: %s\n", mt.prog, mt.rank, mt.size, file, line, msg);
    fflush(stdout); /* an abort later must not lose it */
    fflush(stdout);
}

void mt_check(int ok, const char *file, int line, const char *fmt, ...)
{
    va_list ap;

    mt.checks++;
    if (ok) {
        return;
    }
    mt.failures++;
    if (mt.failures <= mt.max_print) {
        va_start(ap, fmt);
        vreport(file, line, fmt, ap);
        va_end(ap);
    } else if (mt.failures == mt.max_print + 1) {
        printf("[%s rank %d/%d] more failures; only the first %ld are printed "
               "(CGPU_TEST_MAX_PRINT changes that)\n",
               mt.prog, mt.rank, mt.size, mt.max_print);
        fflush(stdout);
    }
}

void mt_note(const char *fmt, ...)
{
    va_list ap;

    if (!mt.verbose || 0 != mt.rank) {
        return;
    }
    printf("[%s] ", mt.prog);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
}

void *mt_xmalloc(size_t n)
{
    void *p = malloc(0 == n ? 1 : n);

    if (NULL == p) {
        fprintf(stderr, "[%s rank %d] out of memory allocating %zu bytes\n", mt.prog, mt.rank, n);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return p;
}

static uint64_t splitmix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

uint64_t mt_hash(uint64_t a, uint64_t b, uint64_t c, uint64_t d)
{
    uint64_t h = splitmix64(a);

    h = splitmix64(h ^ b);
    h = splitmix64(h ^ c);
    return splitmix64(h ^ d);
}

static int env_flag(const char *name)
{
    const char *v = getenv(name);

    return NULL != v && '\0' != v[0] && 0 != strcmp(v, "0");
}

/* Finds the pvar @which by name and checks that it is what coll/gpu promises. */
static void lookup_pvar(int which, int num)
{
    const char *want = pvar_names[which];

    for (int i = 0; i < num; ++i) {
        char name[256], desc[1024];
        int name_len = sizeof(name), desc_len = sizeof(desc);
        int verbosity, var_class, bind, readonly, continuous, atomic;
        MPI_Datatype dtype;
        MPI_T_enum enumtype;
        int type_size = 0;

        if (MPI_SUCCESS != MPI_T_pvar_get_info(i, name, &name_len, &verbosity, &var_class, &dtype,
                                               &enumtype, desc, &desc_len, &bind, &readonly,
                                               &continuous, &atomic)) {
            continue;
        }
        if (0 != strcmp(name, want)) {
            continue;
        }
        MT_CHECK(MPI_T_BIND_MPI_COMM == bind, "pvar %s is not bound to MPI_COMM (bind %d)", want,
                 bind);
        MT_CHECK(MPI_T_PVAR_CLASS_COUNTER == var_class, "pvar %s is not a COUNTER (class %d)", want,
                 var_class);
        MT_CHECK(MPI_UNSIGNED_LONG_LONG == dtype, "pvar %s is not MPI_UNSIGNED_LONG_LONG", want);
        MPI_Type_size(dtype, &type_size);
        if (MPI_T_BIND_MPI_COMM != bind || type_size <= 0 || type_size > 8) {
            return; /* unusable; failure recorded above */
        }
        mt.pvar_index[which] = i;
        mt.pvar_bytes[which] = type_size;
        mt.pvar_type[which] = dtype;
        return;
    }
    if (mt.skip_pvars) {
        if (0 == mt.rank) {
            printf("[%s] note: MPI_T pvar '%s' not found; pvar checks skipped "
                   "(CGPU_TEST_SKIP_PVARS set)\n",
                   mt.prog, want);
        }
        return;
    }
    MT_CHECK(0,
             "MPI_T pvar '%s' not found: coll/gpu is not loaded in this process (check "
             "--mca coll gpu,... and --mca mca_base_component_path); every check of which path "
             "served a call is skipped",
             want);
}

void mt_init(int *argc, char ***argv, const char *prog)
{
    mt_init_thread(argc, argv, prog, MPI_THREAD_SINGLE);
}

/* CGPU_TEST_STACKS=1: SIGUSR2 makes every thread of the process write its stack to stderr,
 * for the diagnosis of a run that hangs (`pkill -USR2 -x <program>` from outside; addr2line
 * on the offsets). The thread the signal lands on forwards it to every other thread of the
 * process; each writes its own stack, one thread at a time. Only system calls and
 * backtrace (loaded at install, so it does not allocate in the handler). */
static atomic_int stacks_fanned;
static atomic_flag stacks_writing = ATOMIC_FLAG_INIT;

static void stacks_put(const char *s)
{
    ssize_t w = write(2, s, strlen(s));
    (void) w;
}

static void stacks_put_long(long v)
{
    char b[24];
    int i = (int) sizeof(b) - 1;
    b[i] = '\0';
    do {
        b[--i] = (char) ('0' + v % 10);
        v /= 10;
    } while (v > 0 && i > 0);
    stacks_put(b + i);
}

static void stacks_forward(long self)
{
    int fd = open("/proc/self/task", O_RDONLY | O_DIRECTORY);
    if (fd < 0) {
        return;
    }
    _Alignas(8) char buf[4096];
    for (;;) {
        long n = syscall(SYS_getdents64, fd, buf, sizeof(buf));
        if (n <= 0) {
            break;
        }
        for (long off = 0; off < n;) {
            const struct { /* the kernel's linux_dirent64 */
                uint64_t ino;
                int64_t next;
                unsigned short reclen;
                unsigned char type;
                char name[];
            } *d = (const void *) (buf + off);
            long tid = 0;
            for (const char *c = d->name; *c >= '0' && *c <= '9'; ++c) {
                tid = tid * 10 + (*c - '0');
            }
            if (tid > 0 && tid != self) {
                (void) syscall(SYS_tgkill, (long) getpid(), tid, SIGUSR2);
            }
            off += d->reclen;
        }
    }
    close(fd);
}

static void stacks_handler(int sig)
{
    (void) sig;
    const long self = (long) syscall(SYS_gettid);
    if (0 == atomic_exchange(&stacks_fanned, 1)) {
        stacks_forward(self);
    }
    while (atomic_flag_test_and_set(&stacks_writing)) {
    }
    void *frames[64];
    const int n = backtrace(frames, 64);
    stacks_put("== stack of rank ");
    stacks_put_long(mt.rank);
    stacks_put(" pid ");
    stacks_put_long((long) getpid());
    stacks_put(" thread ");
    stacks_put_long(self);
    stacks_put("\n");
    backtrace_symbols_fd(frames, n, 2);
    atomic_flag_clear(&stacks_writing);
}

static void stacks_install(void)
{
    if (!env_flag("CGPU_TEST_STACKS")) {
        return;
    }
    void *warm[2];
    (void) backtrace(warm, 2);
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = stacks_handler;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR2, &sa, NULL);
}

void mt_init_thread(int *argc, char ***argv, const char *prog, int required)
{
    int provided = 0, num = 0, rc;

    mt.prog = prog;
    mt.verbose = env_flag("CGPU_TEST_VERBOSE");
    mt.skip_pvars = env_flag("CGPU_TEST_SKIP_PVARS");
    mt.max_print = MT_MAX_PRINTED_FAILURES;
    if (NULL != getenv("CGPU_TEST_MAX_PRINT")) {
        mt.max_print = atol(getenv("CGPU_TEST_MAX_PRINT"));
    }
    MPI_Init_thread(argc, argv, required, &provided);
    stacks_install(); /* after MPI_Init: Open MPI installs its own handlers there */
    MPI_Comm_rank(MPI_COMM_WORLD, &mt.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &mt.size);
    setvbuf(stdout, NULL, _IOLBF, 0);
    MT_CHECK(provided >= required, "MPI thread level %d requested, %d provided", required,
             provided);

    rc = MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
    MT_CHECK(MPI_SUCCESS == rc, "MPI_T_init_thread returned %d", rc);
    if (MPI_SUCCESS != rc) {
        return;
    }
    rc = MPI_T_pvar_session_create(&mt.session);
    MT_CHECK(MPI_SUCCESS == rc, "MPI_T_pvar_session_create returned %d", rc);
    if (MPI_SUCCESS != rc) {
        MPI_T_finalize();
        return;
    }
    mt.mpit_ok = 1;
    rc = MPI_T_pvar_get_num(&num);
    MT_CHECK(MPI_SUCCESS == rc, "MPI_T_pvar_get_num returned %d", rc);
    lookup_pvar(0, num);
    lookup_pvar(1, num);
}

int mt_finalize(void)
{
    long local[2], sum[2], maxfail = 0, skipped = 0;

    if (mt.mpit_ok) {
        MPI_T_pvar_session_free(&mt.session);
        MPI_T_finalize(); /* before MPI_Finalize: the other order crashes Open MPI 4.1 */
        mt.mpit_ok = 0;
    }
    /* This allreduce goes through coll/gpu too; that is fine, it is one more call. */
    MPI_Allreduce(&mt.failures, &maxfail, 1, MPI_LONG, MPI_MAX, MPI_COMM_WORLD);
    local[0] = mt.checks;
    local[1] = mt.failures;
    MPI_Reduce(local, sum, 2, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Reduce(&mt.pvar_skipped, &skipped, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (0 == mt.rank) {
        printf("%s: np=%d: %ld checks, %ld failures (all ranks)", mt.prog, mt.size, sum[0], sum[1]);
        if (skipped > 0) {
            printf(", %ld pvar checks skipped", skipped);
        }
        printf(": %s\n", 0 == maxfail ? "PASSED" : "FAILED");
        fflush(stdout);
    }
    MPI_Finalize();
    return 0 == maxfail ? 0 : 1;
}

/* Reads one pvar into *val. Return: MPI error code. */
static int read_one(mt_pvars_t *p, int which, unsigned long long *val)
{
    union {
        unsigned long long ull;
        unsigned long ul;
        unsigned u;
        unsigned char bytes[16];
    } buf;
    int rc;

    memset(&buf, 0, sizeof(buf));
    rc = MPI_T_pvar_read(mt.session, p->handle[which], &buf);
    if (MPI_SUCCESS != rc) {
        return rc;
    }
    if (MPI_UNSIGNED == mt.pvar_type[which]) {
        *val = buf.u;
    } else if (MPI_UNSIGNED_LONG == mt.pvar_type[which]) {
        *val = buf.ul;
    } else {
        *val = buf.ull;
    }
    return MPI_SUCCESS;
}

void mt_pvars_open(mt_pvars_t *p, MPI_Comm comm, const char *label)
{
    memset(p, 0, sizeof(*p));
    p->comm = comm;
    snprintf(p->label, sizeof(p->label), "%s", label);
    MPI_Comm_size(comm, &p->size);
    if (!mt_pvars_available()) {
        return;
    }
    for (int w = 0; w < 2; ++w) {
        int count = 0;
        int rc =
            MPI_T_pvar_handle_alloc(mt.session, mt.pvar_index[w], &p->comm, &p->handle[w], &count);

        if (MPI_SUCCESS != rc) {
            /* coll/gpu declines single-rank communicators; a missing binding is fine there. */
            if (p->size >= 2) {
                MT_CHECK(0, "comm %s: MPI_T_pvar_handle_alloc(%s) returned %d", label,
                         pvar_names[w], rc);
            }
            continue;
        }
        MT_CHECK(1 == count, "comm %s: pvar %s has %d values, expected 1", label, pvar_names[w],
                 count);
        rc = MPI_T_pvar_start(mt.session, p->handle[w]);
        /* Continuous pvars cannot be started or stopped: they always count. */
        if (MPI_SUCCESS != rc && MPI_T_ERR_PVAR_NO_STARTSTOP != rc) {
            MT_CHECK(0, "comm %s: MPI_T_pvar_start(%s) returned %d", label, pvar_names[w], rc);
        }
        p->have[w] = 1;
    }
    mt_pvars_mark(p);
}

void mt_pvars_close(mt_pvars_t *p)
{
    for (int w = 0; w < 2; ++w) {
        if (!p->have[w]) {
            continue;
        }
        int rc = MPI_T_pvar_stop(mt.session, p->handle[w]);
        if (MPI_SUCCESS != rc && MPI_T_ERR_PVAR_NO_STARTSTOP != rc) {
            MT_CHECK(0, "comm %s: MPI_T_pvar_stop(%s) returned %d", p->label, pvar_names[w], rc);
        }
        rc = MPI_T_pvar_handle_free(mt.session, &p->handle[w]);
        MT_CHECK(MPI_SUCCESS == rc, "comm %s: MPI_T_pvar_handle_free(%s) returned %d", p->label,
                 pvar_names[w], rc);
        p->have[w] = 0;
    }
}

void mt_pvars_mark(mt_pvars_t *p)
{
    for (int w = 0; w < 2; ++w) {
        p->mark[w] = 0;
        if (p->have[w] && MPI_SUCCESS != read_one(p, w, &p->mark[w])) {
            p->mark[w] = 0;
        }
    }
}

int mt_pvars_delta(mt_pvars_t *p, unsigned long long *engine, unsigned long long *fallback)
{
    unsigned long long now[2] = {0, 0};
    int ret = 0;

    if (!mt_pvars_available()) {
        return -1;
    }
    for (int w = 0; w < 2; ++w) {
        if (!p->have[w]) {
            ret = (p->size >= 2) ? -1 : ret; /* single-rank comm: reads as 0 */
            continue;
        }
        int rc = read_one(p, w, &now[w]);
        if (MPI_SUCCESS != rc) {
            if (p->size >= 2) {
                MT_CHECK(0, "comm %s: MPI_T_pvar_read(%s) returned %d", p->label, pvar_names[w],
                         rc);
                ret = -1;
            }
            now[w] = p->mark[w];
        }
    }
    *engine = now[0] - p->mark[0];
    *fallback = now[1] - p->mark[1];
    return ret;
}

void mt_expect_path(mt_pvars_t *p, long ncalls, mt_path_t path, const char *file, int line,
                    const char *what)
{
    unsigned long long eng = 0, fb = 0;
    unsigned long long want_eng = (MT_PATH_ENGINE == path) ? (unsigned long long) ncalls : 0;
    unsigned long long want_fb = (MT_PATH_FALLBACK == path) ? (unsigned long long) ncalls : 0;

    mt.pvar_checks++;
    if (!mt_pvars_available()) {
        mt.pvar_skipped++;
        return;
    }
    if (0 != mt_pvars_delta(p, &eng, &fb)) {
        mt_check(0, file, line, "comm %s (size %d): %s: cannot read the coll/gpu pvars", p->label,
                 p->size, what);
        mt_pvars_mark(p);
        return;
    }
    if (p->size >= 2) {
        mt_check(eng == want_eng && fb == want_fb, file, line,
                 "comm %s (size %d): %s: %ld calls, expected all on the %s path, but "
                 "engine_calls grew by %llu and fallback_calls by %llu",
                 p->label, p->size, what, ncalls, MT_PATH_ENGINE == path ? "engine" : "fallback",
                 eng, fb);
    } else {
        /* one rank: coll/gpu copies calls with device buffers itself (engine_calls) and passes
         * host-only calls on (fallback_calls); coll_gpu_stage_host_buffers=1 treats host
         * buffers as device ones. Open MPI answers some one-rank calls itself (MPI_Bcast), so
         * only the counter that must stay put is checked. */
#ifdef CGPU_TEST_CUDA
        /* the GPU tests mix device and host buffers: each call counted once at most */
        mt_check(eng + fb <= (unsigned long long) ncalls, file, line,
                 "comm %s (size 1): %s: %ld calls, but engine_calls grew by %llu and "
                 "fallback_calls by %llu",
                 p->label, what, ncalls, eng, fb);
#else
        const char *st = getenv("OMPI_MCA_coll_gpu_stage_host_buffers");
        const int staged = NULL != st && 0 != atoi(st);
        mt_check(staged ? 0 == fb : 0 == eng, file, line,
                 "comm %s (size 1): %s: host buffers%s, but %s grew by %llu", p->label, what,
                 staged ? " staged as device ones" : "", staged ? "fallback_calls" : "engine_calls",
                 staged ? fb : eng);
#endif
    }
    mt_pvars_mark(p);
}

int mt_pvar_index(const char *name, int *is_int)
{
    int num = 0;
    MPI_T_pvar_get_num(&num);
    for (int i = 0; i < num; ++i) {
        char nm[256], desc[1024];
        int nl = sizeof(nm), dl = sizeof(desc), verb, cls, bind, ro, cont, atomic;
        MPI_Datatype dt;
        MPI_T_enum en;
        if (MPI_SUCCESS == MPI_T_pvar_get_info(i, nm, &nl, &verb, &cls, &dt, &en, desc, &dl, &bind,
                                               &ro, &cont, &atomic) &&
            0 == strcmp(nm, name)) {
            *is_int = (MPI_INT == dt);
            return i;
        }
    }
    return -1;
}

int mt_comm_int_pvar(MPI_Comm comm, const char *name)
{
    int is_int = 0, idx = mt_pvar_index(name, &is_int), count = 0, v = -1;
    if (idx < 0 || !is_int) {
        return -1;
    }
    MPI_T_pvar_session s;
    MPI_T_pvar_handle h;
    if (MPI_SUCCESS != MPI_T_pvar_session_create(&s)) {
        return -1;
    }
    if (MPI_SUCCESS == MPI_T_pvar_handle_alloc(s, idx, &comm, &h, &count)) {
        if (MPI_SUCCESS != MPI_T_pvar_read(s, h, &v)) {
            v = -1;
        }
        MPI_T_pvar_handle_free(s, &h);
    }
    MPI_T_pvar_session_free(&s);
    return v;
}

static void pvar_open(mt_proc_pvar_t *p, const char *name, MPI_Comm *comm)
{
    int is_int = 0, count = 0, idx = mt_pvar_index(name, &is_int);
    p->ok = idx >= 0 && MPI_SUCCESS == MPI_T_pvar_session_create(&p->session);
    if (p->ok &&
        MPI_SUCCESS != MPI_T_pvar_handle_alloc(p->session, idx, comm, &p->handle, &count)) {
        MPI_T_pvar_session_free(&p->session);
        p->ok = 0;
    }
    if (p->ok) { /* a counter that is not continuous counts only while started */
        const int rc = MPI_T_pvar_start(p->session, p->handle);
        MT_CHECK(MPI_SUCCESS == rc || MPI_T_ERR_PVAR_NO_STARTSTOP == rc,
                 "MPI_T_pvar_start(%s) returned %d", name, rc);
    }
    MT_CHECK(p->ok, "%s pvar %s cannot be read", NULL == comm ? "process" : "communicator", name);
}

void mt_proc_pvar_open(mt_proc_pvar_t *p, const char *name)
{
    pvar_open(p, name, NULL);
}

void mt_comm_pvar_open(mt_proc_pvar_t *p, const char *name, MPI_Comm comm)
{
    pvar_open(p, name, &comm);
}

unsigned long long mt_proc_pvar_read(mt_proc_pvar_t *p)
{
    unsigned long long v = 0;
    if (p->ok) {
        MT_CHECK_MPI(MPI_T_pvar_read(p->session, p->handle, &v));
    }
    return v;
}

void mt_proc_pvar_close(mt_proc_pvar_t *p)
{
    if (p->ok) {
        MPI_T_pvar_handle_free(p->session, &p->handle);
        MPI_T_pvar_session_free(&p->session);
        p->ok = 0;
    }
}

void mt_run_world_dup_split(void (*suite)(MPI_Comm comm, const char *label, uint64_t salt),
                            uint64_t salt0)
{
    MPI_Comm dup, half;
    const int rank = mt_world_rank();

    suite(MPI_COMM_WORLD, "world", salt0 + 1);
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    suite(dup, "dup(world)", salt0 + 2);
    MPI_Comm_free(&dup);
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
    suite(half, rank % 2 ? "split(odd)" : "split(even)", salt0 + 3);
    MPI_Comm_free(&half);
}

int mt_mca_is(const char *name, const char *value)
{
    char var[128];
    snprintf(var, sizeof(var), "OMPI_MCA_coll_gpu_%s", name);
    const char *v = getenv(var);
    return NULL != v && 0 == strcmp(v, value);
}
