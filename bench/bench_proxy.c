/*
 * bench_proxy: bandwidth of the inter-node proxy against libfabric used directly.
 *
 * Two forked processes on one machine, one provider (argv[1], default tcp). For each size
 * from 4 KiB to 64 MiB, one process sends a window of messages, the other receives them,
 * and the window repeats; the receiver answers the last window with a 1-byte message, so
 * the sender's clock covers delivery. Three columns:
 *   raw     libfabric directly: an RDM endpoint of this file's own, fi_tsend / fi_trecv
 *           windows (as fabtests' fi_bw does), completions polled by the calling thread;
 *   proxy   cgpu_proxy_isend / irecv windows on host memory, cgpu_proxy_waitall;
 *   device  the same on cudaMalloc'd memory (only where a GPU is usable).
 * GB/s = bytes moved / time (10^9 bytes per second), the best of 3 measurements of about
 * 256 MiB each; ratio = proxy / raw.
 *
 * Usage: bench_proxy [provider] [max_bytes] [window]
 */
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include "cgpu_cuda.h"
#include "cgpu_engine.h"
#include "cgpu_proxy.h"

enum { B_NAME = 128, B_MAX_SIZES = 16, B_MAX_WINDOW = 256, B_REPS = 3 /* best of */ };

typedef struct shared {
    _Atomic unsigned arrived, generation;
    unsigned char name[2][B_NAME];
    double gbps[3][B_MAX_SIZES]; /* filled by rank 0 */
    int nsizes;
    size_t sizes[B_MAX_SIZES];
    int have_device;
} shared_t;

static shared_t *S;
static int me;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + (double) ts.tv_nsec * 1e-9;
}

static void barrier(void)
{
    const unsigned gen = atomic_load(&S->generation);
    if (1 == atomic_fetch_add(&S->arrived, 1)) {
        atomic_store(&S->arrived, 0);
        atomic_fetch_add(&S->generation, 1);
        return;
    }
    while (gen == atomic_load(&S->generation)) {
        struct timespec ts = {0, 20000};
        nanosleep(&ts, NULL);
    }
}

static void die(const char *what, long rc)
{
    fprintf(stderr, "bench_proxy rank %d: %s failed (%ld: %s)\n", me, what, rc,
            rc < 0 ? fi_strerror((int) -rc) : "");
    exit(2);
}

static void die_st(const char *what, cgpu_status_t st)
{
    fprintf(stderr, "bench_proxy rank %d: %s failed (%s)\n", me, what, cgpu_status_string(st));
    exit(2);
}

/* Iterations of the window for a size: about 256 MiB per measurement, at least 4. */
static int iters_for(size_t bytes, int window)
{
    size_t per = bytes * (size_t) window;
    int n = (int) ((256u << 20) / (per > 0 ? per : 1));
    return n < 4 ? 4 : n > 2000 ? 2000 : n;
}

/* ---- raw libfabric ---- */

typedef struct raw {
    struct fi_info *info;
    struct fid_fabric *fabric;
    struct fid_domain *domain;
    struct fid_cq *cq;
    struct fid_av *av;
    struct fid_ep *ep;
    fi_addr_t peer;
    struct fi_context2 ctx[B_MAX_WINDOW + 1];
} raw_t;

static void raw_open(raw_t *r, const char *prov)
{
    struct fi_info *hints = fi_allocinfo();
    struct fi_cq_attr cqa = {.format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_NONE, .size = 1024};
    struct fi_av_attr ava = {.type = FI_AV_TABLE, .count = 4};
    size_t len = B_NAME;
    long rc;

    hints->caps = FI_TAGGED | FI_MSG;
    hints->mode = FI_CONTEXT | FI_CONTEXT2;
    hints->ep_attr->type = FI_EP_RDM;
    hints->domain_attr->threading = FI_THREAD_DOMAIN;
    hints->domain_attr->mr_mode =
        FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT;
    hints->fabric_attr->prov_name = strdup(prov);
    if (0 != (rc = fi_getinfo(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), NULL, NULL, 0, hints,
                              &r->info))) {
        die("fi_getinfo", rc);
    }
    fi_freeinfo(hints);
    if (0 != (rc = fi_fabric(r->info->fabric_attr, &r->fabric, NULL)) ||
        0 != (rc = fi_domain(r->fabric, r->info, &r->domain, NULL)) ||
        0 != (rc = fi_cq_open(r->domain, &cqa, &r->cq, NULL)) ||
        0 != (rc = fi_av_open(r->domain, &ava, &r->av, NULL)) ||
        0 != (rc = fi_endpoint(r->domain, r->info, &r->ep, NULL)) ||
        0 != (rc = fi_ep_bind(r->ep, &r->cq->fid, FI_TRANSMIT | FI_RECV)) ||
        0 != (rc = fi_ep_bind(r->ep, &r->av->fid, 0)) || 0 != (rc = fi_enable(r->ep))) {
        die("opening the raw endpoint", rc);
    }
    memset(S->name[me], 0, B_NAME);
    if (0 != (rc = fi_getname(&r->ep->fid, S->name[me], &len))) {
        die("fi_getname", rc);
    }
    barrier();
    if (1 != fi_av_insert(r->av, S->name[1 - me], 1, &r->peer, 0, NULL)) {
        die("fi_av_insert", -FI_EINVAL);
    }
    barrier();
}

static void raw_close(raw_t *r)
{
    fi_close(&r->ep->fid);
    fi_close(&r->av->fid);
    fi_close(&r->cq->fid);
    fi_close(&r->domain->fid);
    fi_close(&r->fabric->fid);
    fi_freeinfo(r->info);
}

static void raw_wait(raw_t *r, int n)
{
    struct fi_cq_tagged_entry e[16];
    while (n > 0) {
        ssize_t k = fi_cq_read(r->cq, e, 16);
        if (k > 0) {
            n -= (int) k;
        } else if (-FI_EAGAIN != k) {
            struct fi_cq_err_entry err = {0};
            fi_cq_readerr(r->cq, &err, 0);
            die("a completion", -(long) err.err);
        }
    }
}

static void raw_post(raw_t *r, bool send, void *buf, size_t len, uint64_t tag, void *ctx)
{
    for (;;) {
        ssize_t rc = send ? fi_tsend(r->ep, buf, len, NULL, r->peer, tag, ctx)
                          : fi_trecv(r->ep, buf, len, NULL, r->peer, tag, 0, ctx);
        if (0 == rc) {
            return;
        }
        if (-FI_EAGAIN != rc) {
            die(send ? "fi_tsend" : "fi_trecv", rc);
        }
        struct fi_cq_tagged_entry e;
        (void) fi_cq_read(r->cq, &e, 0); /* progress only */
    }
}

static double raw_bw(raw_t *r, char *buf, size_t bytes, int window)
{
    const int iters = iters_for(bytes, window);
    char ack = 0;
    barrier();
    const double t0 = now();
    for (int it = 0; it < iters; ++it) {
        for (int w = 0; w < window; ++w) {
            raw_post(r, 0 == me, buf + (size_t) w * bytes, bytes, (uint64_t) w, &r->ctx[w]);
        }
        raw_wait(r, window);
    }
    raw_post(r, 1 == me, &ack, 1, 1u << 20, &r->ctx[window]);
    raw_wait(r, 1);
    const double dt = now() - t0;
    return (double) bytes * window * iters / dt / 1e9;
}

/* ---- the proxy ---- */

static double proxy_bw(cgpu_proxy_group_t *g, char *buf, char *ack, size_t bytes, int window)
{
    const int iters = iters_for(bytes, window);
    cgpu_proxy_req_t req[B_MAX_WINDOW];
    barrier();
    const double t0 = now();
    for (int it = 0; it < iters; ++it) {
        for (int w = 0; w < window; ++w) {
            cgpu_status_t st = 0 == me ? cgpu_proxy_isend(g, 1, buf + (size_t) w * bytes, bytes,
                                                          (uint32_t) w, &req[w])
                                       : cgpu_proxy_irecv(g, 0, buf + (size_t) w * bytes, bytes,
                                                          (uint32_t) w, &req[w]);
            if (CGPU_OK != st) {
                die_st("posting through the proxy", st);
            }
        }
        cgpu_status_t st = cgpu_proxy_waitall(req, window, 60.0, NULL);
        if (CGPU_OK != st) {
            die_st("cgpu_proxy_waitall", st);
        }
    }
    cgpu_status_t st = 0 == me ? cgpu_proxy_irecv(g, 1, ack, 1, 1u << 20, &req[0])
                               : cgpu_proxy_isend(g, 0, ack, 1, 1u << 20, &req[0]);
    if (CGPU_OK != st || CGPU_OK != cgpu_proxy_waitall(req, 1, 60.0, NULL)) {
        die_st("the final acknowledgement", st);
    }
    const double dt = now() - t0;
    return (double) bytes * window * iters / dt / 1e9;
}

/* Window of the messages of a size: 64, fewer for big ones (at most 256 MiB in flight). */
static int window_for(size_t bytes, int window)
{
    while (window > 1 && bytes * (size_t) window > (256u << 20)) {
        window /= 2;
    }
    return window;
}

/* Every size through the proxy from @p buf, best of B_REPS; rank 0 keeps column @p col. */
static void proxy_sweep(cgpu_proxy_group_t *g, char *buf, char *ack, int window, int me, int col)
{
    for (int k = 0; k < S->nsizes; ++k) {
        double bw = 0;
        for (int rep = 0; rep < B_REPS; ++rep) {
            double x = proxy_bw(g, buf, ack, S->sizes[k], window_for(S->sizes[k], window));
            bw = x > bw ? x : bw;
        }
        if (0 == me) {
            S->gbps[col][k] = bw;
        }
    }
}

static void rank_main(const char *prov, int window)
{
    const size_t max = S->sizes[S->nsizes - 1];
    const size_t span = max * (size_t) window_for(max, window);
    char *buf = malloc(span > (64u << 20) ? span : (64u << 20));
    char ack[8] = {0};
    if (NULL == buf) {
        die("malloc", 0);
    }
    memset(buf, me + 1, span);

    raw_t r;
    memset(&r, 0, sizeof(r));
    raw_open(&r, prov);
    for (int k = 0; k < S->nsizes; ++k) {
        double g = 0;
        for (int rep = 0; rep < B_REPS; ++rep) {
            double x = raw_bw(&r, buf, S->sizes[k], window_for(S->sizes[k], window));
            g = x > g ? x : g;
        }
        if (0 == me) {
            S->gbps[0][k] = g;
        }
    }
    raw_close(&r);
    barrier();

    cgpu_config_t cfg;
    cgpu_config_default(&cfg);
    cfg.backend = CGPU_BACKEND_HOST;
    cfg.ofi_provider = prov;
    cfg.verbose = NULL != getenv("CGPU_BENCH_VERBOSE") ? 10 : 0;
    if (CGPU_OK != cgpu_engine_init(&cfg) || CGPU_OK != cgpu_proxy_acquire()) {
        die("starting the proxy", 0);
    }
    unsigned char names[2][CGPU_PROXY_ADDR_BYTES];
    cgpu_proxy_addr(S->name[me]);
    barrier();
    memcpy(names, S->name, sizeof(names));
    barrier();
    cgpu_prof_comm_t prof_off = {0};
    cgpu_proxy_group_t *g = NULL;
    if (CGPU_OK != cgpu_proxy_group_create(me, 2, names, 1, &prof_off, &g)) {
        die("cgpu_proxy_group_create", 0);
    }
    proxy_sweep(g, buf, ack, window, me, 1);
    if (cgpu_cuda_available()) {
        void *d = NULL;
        if (0 == me) {
            S->have_device = 1;
        }
        if (CGPU_OK != cgpu_cuda_malloc(&d, span, NULL)) {
            die("cudaMalloc", 0);
        }
        proxy_sweep(g, d, ack, window, me, 2);
        cgpu_cuda_free(d);
    }
    if (0 == me) {
        printf("# provider %s, device memory %s\n", cgpu_proxy_provider(),
               cgpu_cuda_available() ? (cgpu_proxy_hmem() ? "direct (FI_HMEM)" : "staged")
                                     : "not measured (no GPU)");
    }
    cgpu_proxy_group_destroy(&g);
    cgpu_proxy_release();
    cgpu_engine_fini();
    free(buf);
}

int main(int argc, char **argv)
{
    const char *prov = argc > 1 ? argv[1] : "tcp";
    const size_t max = argc > 2 ? (size_t) strtoull(argv[2], NULL, 0) : (64u << 20);
    int window = argc > 3 ? atoi(argv[3]) : 64;
    pid_t pid[2];
    int status[2];

    if (window < 1 || window > B_MAX_WINDOW) {
        window = 64;
    }
    S = mmap(NULL, sizeof(*S), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (MAP_FAILED == S) {
        perror("mmap");
        return 2;
    }
    for (size_t b = 4096; b <= max && S->nsizes < B_MAX_SIZES; b *= 4) {
        S->sizes[S->nsizes++] = b;
    }
    fflush(stdout);
    for (int r = 0; r < 2; ++r) {
        pid[r] = fork();
        if (0 == pid[r]) {
            me = r;
            rank_main(prov, window);
            exit(0);
        }
    }
    bool ok = true;
    for (int r = 0; r < 2; ++r) {
        waitpid(pid[r], &status[r], 0);
        ok = ok && WIFEXITED(status[r]) && 0 == WEXITSTATUS(status[r]);
    }
    if (!ok) {
        fprintf(stderr, "bench_proxy: a rank failed\n");
        return 1;
    }
    printf("# bench_proxy: 2 processes, provider %s, window %d (fewer above 4 MiB: 256 MiB in "
           "flight at most), GB/s = 1e9 bytes/s, best of %d\n",
           prov, window, B_REPS);
    printf("%10s %10s %10s %8s", "bytes", "raw GB/s", "proxy GB/s", "ratio");
    if (S->have_device) {
        printf(" %11s %8s", "device GB/s", "ratio");
    }
    printf("\n");
    for (int k = 0; k < S->nsizes; ++k) {
        printf("%10zu %10.3f %10.3f %8.2f", S->sizes[k], S->gbps[0][k], S->gbps[1][k],
               S->gbps[1][k] / S->gbps[0][k]);
        if (S->have_device) {
            printf(" %11.3f %8.2f", S->gbps[2][k], S->gbps[2][k] / S->gbps[0][k]);
        }
        printf("\n");
    }
    return 0;
}
