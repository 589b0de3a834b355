/*
 * The node's copy ceilings: what the hardware moves between the GPUs of one machine with none of
 * our code in the way, so that a collective's large-message figure can be stated as a fraction of
 * its ceiling (bench/README.md). One process drives every visible GPU, peer access on between
 * every pair, and times one size: each ordered pair alone (copy engine pushed by the source or
 * pulled by the destination, a kernel storing into the peer or loading from it), each pair both
 * ways at once, a ring and every GPU to every other at once, a copy within each GPU; then the
 * ceilings of an allreduce or allgather these imply.
 *
 *   bench_ceiling [bytes[k|M|G] [reps [blocks_per_sm]]]     (default 256M, 10, 2)
 *
 * GB/s are 10^9 bytes a second, a copied byte counted once; time is the median of reps timed runs
 * after WARMUP. Each destination is poisoned before a measurement and checked against its
 * source's pattern after it ("BAD", exit status 1 on a wrong copy); 77: no GPU.
 */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <algorithm>
#include <vector>

#define MAXG 16 /* GPUs used at most: copy_list is a kernel argument of fixed size */
#define THREADS 512
#define UNROLL 4 /* 16-byte loads in flight per thread before its stores: hides link latency */
#define WARMUP 2

#include "bench_cuda_check.h"

/* The word k of GPU g's source. An odd multiplier of g: two GPUs' patterns, and a pattern and its
 * poison (+1), differ at every word, so a copy from the wrong source, or shifted, is caught
 * anywhere. */
__host__ __device__ static inline uint32_t pattern(int g, size_t k)
{
    return (uint32_t) k * 2654435761u + (uint32_t) (k >> 32) * 40503u + (uint32_t) g * 0x9E3779B9u;
}

/* Writes GPU g's pattern plus delta into p (bad NULL; delta 1 poisons a destination), or counts
 * into *bad the words of p that differ from it. */
__global__ void pattern_kernel(uint32_t *p, size_t n, int g, uint32_t delta,
                               unsigned long long *bad)
{
    unsigned long long c = 0;
    for (size_t k = blockIdx.x * (size_t) blockDim.x + threadIdx.x; k < n;
         k += (size_t) gridDim.x * blockDim.x) {
        if (NULL == bad) {
            p[k] = pattern(g, k) + delta;
        } else {
            c += pattern(g, k) != p[k];
        }
    }
    if (0 != c) {
        atomicAdd(bad, c);
    }
}

/* Up to MAXG copies of the same length; blockIdx.y picks one, so one launch serves a GPU's n-1
 * shares and the blocks divide between them. */
struct copy_list {
    const uint4 *src[MAXG];
    uint4 *dst[MAXG];
};

__global__ void __launch_bounds__(THREADS) copy_kernel(copy_list l, size_t n16)
{
    const uint4 *__restrict__ s = l.src[blockIdx.y];
    uint4 *__restrict__ d = l.dst[blockIdx.y];
    size_t stride = (size_t) gridDim.x * blockDim.x;
    size_t i = blockIdx.x * (size_t) blockDim.x + threadIdx.x;
    for (; i + (UNROLL - 1) * stride < n16; i += UNROLL * stride) {
        uint4 v[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            v[u] = s[i + u * stride];
        }
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            d[i + u * stride] = v[u];
        }
    }
    for (; i < n16; i += stride) {
        d[i] = s[i];
    }
}

/* Holds back a measurement until the host has queued all of it, so that the copies start
 * together and the host's launch time is not timed. The timeout keeps a lost flag from hanging
 * the run (then flag[1] says the figures include launch time). */
__global__ void gate_kernel(volatile int *flag)
{
    uint64_t t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
        if (t - t0 > 2000000000ull) {
            flag[1] = 1;
            return;
        }
    } while (0 == flag[0]);
}

enum method { CE_PUSH, CE_PULL, SM_STORE, SM_LOAD, N_METHODS };
static const char *method_name[N_METHODS] = {"ce_push", "ce_pull", "sm_store", "sm_load"};

struct xfer {
    int src, dst;
};

/* One stream's share of a measurement: a peer copy, or a kernel over up to MAXG copies. */
struct op {
    int dev, lane, n, src, dst; /* lane: which of dev's streams */
    bool kernel;
    copy_list l;
};

static struct {
    int n, reps, blocks[MAXG], can[MAXG][MAXG];
    size_t bytes;
    char *src[MAXG], *dst[MAXG]; /* dst: n slots of `bytes`, slot k receives from GPU k */
    unsigned long long *bad[MAXG];
    cudaStream_t s[MAXG][MAXG], ctl[MAXG]; /* s[i][k]: GPU i's stream towards GPU k */
    cudaEvent_t done[MAXG][MAXG], t0[MAXG], t1[MAXG];
    volatile int *flag; /* host-mapped: [0] the gate is open, [1] a gate timed out */
    int wrong;          /* rows with a wrong copy */
} g;

static char *slot(int dst, int src)
{
    return g.dst[dst] + (size_t) src * g.bytes;
}

static void fill(int dev, char *p, int pat, uint32_t delta)
{
    CK(cudaSetDevice(dev));
    pattern_kernel<<<g.blocks[dev], THREADS, 0, g.s[dev][dev]>>>((uint32_t *) p, g.bytes / 4, pat,
                                                                 delta, NULL);
    CK(cudaGetLastError());
    CK(cudaStreamSynchronize(g.s[dev][dev]));
}

static bool check(int dst, int src)
{
    unsigned long long bad = 0;
    cudaStream_t st = g.s[dst][dst];
    CK(cudaSetDevice(dst));
    CK(cudaMemsetAsync(g.bad[dst], 0, sizeof(bad), st));
    pattern_kernel<<<g.blocks[dst], THREADS, 0, st>>>((uint32_t *) slot(dst, src), g.bytes / 4, src,
                                                      0, g.bad[dst]);
    CK(cudaGetLastError());
    CK(cudaMemcpyAsync(&bad, g.bad[dst], sizeof(bad), cudaMemcpyDeviceToHost, st));
    CK(cudaStreamSynchronize(st));
    if (0 != bad) {
        fprintf(stderr, "bench_ceiling: %llu of %zu words wrong in the copy %d -> %d\n", bad,
                g.bytes / 4, src, dst);
    }
    return 0 == bad;
}

/* One timed run: the timer (t0, t1) and the gate on the first op's GPU, each op's stream waiting
 * for t0 and the timer's stream for every op, so the time spans the first start to the last end
 * (plus a few microseconds of cross-GPU event signalling where a measurement spans GPUs). */
static float run_once(const std::vector<op> &ops)
{
    int t = ops[0].dev;
    float ms = 0;
    g.flag[0] = 0;
    CK(cudaSetDevice(t));
    gate_kernel<<<1, 1, 0, g.ctl[t]>>>(g.flag);
    CK(cudaGetLastError());
    CK(cudaEventRecord(g.t0[t], g.ctl[t]));
    for (const op &o : ops) {
        cudaStream_t st = g.s[o.dev][o.lane];
        CK(cudaSetDevice(o.dev));
        CK(cudaStreamWaitEvent(st, g.t0[t], 0));
        if (o.kernel) {
            dim3 grid(std::max(1, g.blocks[o.dev] / o.n), o.n);
            copy_kernel<<<grid, THREADS, 0, st>>>(o.l, g.bytes / 16);
            CK(cudaGetLastError());
        } else if (o.src == o.dst) {
            CK(cudaMemcpyAsync(o.l.dst[0], o.l.src[0], g.bytes, cudaMemcpyDeviceToDevice, st));
        } else {
            CK(cudaMemcpyPeerAsync(o.l.dst[0], o.dst, o.l.src[0], o.src, g.bytes, st));
        }
        CK(cudaEventRecord(g.done[o.dev][o.lane], st));
    }
    CK(cudaSetDevice(t));
    for (const op &o : ops) {
        CK(cudaStreamWaitEvent(g.ctl[t], g.done[o.dev][o.lane], 0));
    }
    CK(cudaEventRecord(g.t1[t], g.ctl[t]));
    __sync_synchronize();
    g.flag[0] = 1;
    CK(cudaEventSynchronize(g.t1[t]));
    CK(cudaEventElapsedTime(&ms, g.t0[t], g.t1[t]));
    return ms;
}

/* The copies xs all at once by method m: GB/s of all their bytes together, or -1 where a kernel
 * cannot reach the peer's memory. *ok is cleared when a destination is wrong afterwards. */
static double measure(const std::vector<xfer> &xs, int m, bool *ok)
{
    bool kernel = SM_STORE == m || SM_LOAD == m;
    std::vector<op> ops;
    std::vector<float> ms;
    ops.reserve(xs.size());
    for (const xfer &x : xs) {
        int dev = (CE_PUSH == m || SM_STORE == m) ? x.src : x.dst; /* who drives the copy */
        int peer = x.src + x.dst - dev;
        op *o = NULL;
        if (kernel && peer != dev && !g.can[dev][peer]) {
            return -1.0;
        }
        for (op &e : ops) {
            o = (kernel && e.dev == dev) ? &e : o;
        }
        if (NULL == o) {
            ops.push_back(op());
            o = &ops.back();
            o->dev = dev;
            o->lane = kernel ? dev : peer;
            o->kernel = kernel;
        }
        o->l.src[o->n] = (const uint4 *) g.src[x.src];
        o->l.dst[o->n] = (uint4 *) slot(x.dst, x.src);
        o->n++;
        o->src = x.src;
        o->dst = x.dst;
        fill(x.dst, slot(x.dst, x.src), x.src, 1); /* poison: a copy that did not happen shows */
    }
    for (int r = 0; r < WARMUP + g.reps; ++r) {
        float t = run_once(ops);
        if (r >= WARMUP) {
            ms.push_back(t);
        }
    }
    std::sort(ms.begin(), ms.end());
    double med = (ms[(ms.size() - 1) / 2] + ms[ms.size() / 2]) / 2.0;
    for (const xfer &x : xs) {
        if (!check(x.dst, x.src)) {
            *ok = false;
        }
    }
    return (double) g.bytes * xs.size() / (med * 1e-3) / 1e9;
}

static void put(double gbps)
{
    if (gbps < 0) {
        printf(" -");
    } else {
        printf(" %.1f", gbps);
    }
}

static const char *verdict(bool ok)
{
    if (!ok) {
        g.wrong++;
    }
    return ok ? "ok" : "BAD";
}

static size_t parse_bytes(const char *s)
{
    char *end = NULL;
    size_t v = strtoull(s, &end, 10);
    int shift = 'k' == (*end | 32) ? 10 : 'm' == (*end | 32) ? 20 : 'g' == (*end | 32) ? 30 : 0;
    return '\0' == end[0 != shift] ? v << shift : 0;
}

static void setup(int per_sm)
{
    int *flag = NULL;
    CK(cudaHostAlloc(&flag, 2 * sizeof(int), cudaHostAllocMapped | cudaHostAllocPortable));
    g.flag = flag; /* with unified addressing the host pointer is the device pointer */
    for (int i = 0; i < g.n; ++i) {
        int sms = 0;
        CK(cudaSetDevice(i));
        CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, i));
        g.blocks[i] = sms * per_sm;
        CK(cudaMalloc(&g.src[i], g.bytes));
        CK(cudaMalloc(&g.dst[i], g.bytes * g.n));
        CK(cudaMalloc(&g.bad[i], sizeof(unsigned long long)));
        CK(cudaStreamCreateWithFlags(&g.ctl[i], cudaStreamNonBlocking));
        CK(cudaEventCreate(&g.t0[i]));
        CK(cudaEventCreate(&g.t1[i]));
        for (int k = 0; k < g.n; ++k) {
            CK(cudaStreamCreateWithFlags(&g.s[i][k], cudaStreamNonBlocking));
            CK(cudaEventCreateWithFlags(&g.done[i][k], cudaEventDisableTiming));
            if (k != i) {
                CK(cudaDeviceCanAccessPeer(&g.can[i][k], i, k));
            }
            if (g.can[i][k]) {
                CK(cudaDeviceEnablePeerAccess(k, 0));
            }
        }
        fill(i, g.src[i], i, 0);
    }
}

static void teardown(void)
{
    CK(cudaFreeHost((void *) g.flag));
    for (int i = 0; i < g.n; ++i) { /* a reset frees the GPU's buffers, streams and events */
        CK(cudaSetDevice(i));
        CK(cudaDeviceReset());
    }
}

/* A table of one pattern (ring, alltoall) under every method; returns the best per-GPU figure. */
static double pattern_table(const char *name, const char *what, const std::vector<xfer> &xs)
{
    double best = 0;
    printf(
        "# %s: %s; per_gpu: a GPU's outgoing GB/s, total: all GPUs'\nmethod per_gpu total check\n",
        name, what);
    for (int m = 0; m < N_METHODS; ++m) {
        bool ok = true;
        double bw = measure(xs, m, &ok);
        printf("%s", method_name[m]);
        put(bw < 0 ? -1 : bw / g.n);
        put(bw);
        printf(" %s\n", verdict(ok));
        best = std::max(best, bw / g.n);
    }
    return best;
}

int main(int argc, char **argv)
{
    int n = 0, rt = 0, drv = 0, per_sm = argc > 3 ? atoi(argv[3]) : 2;
    size_t bytes = argc > 1 ? parse_bytes(argv[1]) : (size_t) 256 << 20;
    double one_way = 1e30, bidir = 1e30, ring = 0, a2a = 0;

    /* Kernels loaded at start: lazily loaded at a launch queued behind the gate, they could wait
     * for it. A hardware queue per stream: streams sharing one would serialize the copies that
     * the all-at-once measurements run side by side. */
    setenv("CUDA_MODULE_LOADING", "EAGER", 0);
    setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
    g.reps = argc > 2 ? atoi(argv[2]) : 10;
    if (bytes < 16 || g.reps < 1 || per_sm < 1) {
        fprintf(stderr, "usage: bench_ceiling [bytes[k|M|G] [reps [blocks_per_sm]]]\n");
        return 2;
    }
    if (cudaSuccess != cudaGetDeviceCount(&n) || n < 1) {
        printf("skipped: no GPU\n");
        return 77;
    }
    g.n = std::min(n, MAXG);
    g.bytes = bytes & ~(size_t) 15; /* whole 16-byte vectors */
    CK(cudaRuntimeGetVersion(&rt));
    CK(cudaDriverGetVersion(&drv));
    printf("# bench_ceiling: %d GPUs (of %d):", g.n, n);
    for (int i = 0; i < g.n; ++i) {
        cudaDeviceProp p;
        CK(cudaGetDeviceProperties(&p, i));
        printf(" %d=%s", i, p.name);
    }
    printf("; CUDA runtime %d.%d, driver %d.%d; bytes %zu a copy; median of %d runs after %d; "
           "kernels %d threads x %d blocks/SM\n",
           rt / 1000, rt % 1000 / 10, drv / 1000, drv % 1000 / 10, g.bytes, g.reps, WARMUP, THREADS,
           per_sm);
    setup(per_sm);

    printf("# pair: one copy src -> dst alone, GB/s; access, rank (lower is faster) and atomics: "
           "cudaDeviceGetP2PAttribute (the links: nvidia-smi topo -m)\n"
           "src dst access rank atomics ce_push ce_pull sm_store sm_load check\n");
    for (int i = 0; i < g.n; ++i) {
        for (int j = 0; j < g.n; ++j) {
            int a = 0, r = 0, at = 0;
            bool ok = true;
            double best = 0;
            if (i == j) {
                continue;
            }
            CK(cudaDeviceGetP2PAttribute(&a, cudaDevP2PAttrAccessSupported, i, j));
            CK(cudaDeviceGetP2PAttribute(&r, cudaDevP2PAttrPerformanceRank, i, j));
            CK(cudaDeviceGetP2PAttribute(&at, cudaDevP2PAttrNativeAtomicSupported, i, j));
            printf("%d %d %d %d %d", i, j, a, r, at);
            for (int m = 0; m < N_METHODS; ++m) {
                double bw = measure({{i, j}}, m, &ok);
                put(bw);
                best = std::max(best, bw);
            }
            printf(" %s\n", verdict(ok));
            one_way = std::min(one_way, best);
        }
    }

    printf("# bidir: a -> b and b -> a at once; each: one direction's GB/s, total: both\n"
           "a b ce_each ce_total sm_store_each sm_store_total check\n");
    for (int i = 0; i < g.n; ++i) {
        for (int j = i + 1; j < g.n; ++j) {
            bool ok = true;
            double ce = measure({{i, j}, {j, i}}, CE_PUSH, &ok);
            double sm = measure({{i, j}, {j, i}}, SM_STORE, &ok);
            printf("%d %d", i, j);
            put(ce / 2);
            put(ce);
            put(sm < 0 ? -1 : sm / 2);
            put(sm);
            printf(" %s\n", verdict(ok));
            bidir = std::min(bidir, std::max(ce, sm) / 2);
        }
    }

    if (g.n > 1) {
        std::vector<xfer> rx, ax;
        for (int i = 0; i < g.n; ++i) {
            rx.push_back({i, (i + 1) % g.n});
            for (int j = 0; j < g.n; ++j) {
                if (i != j) {
                    ax.push_back({i, j});
                }
            }
        }
        ring = pattern_table("ring", "every GPU i -> (i+1) % n at once", rx);
        a2a = pattern_table("alltoall",
                            "every GPU -> every other at once, a copy per destination "
                            "(ce: a stream each; sm: one kernel a GPU)",
                            ax);
    }

    printf("# local: a copy within each GPU, GB/s (bytes copied, not read + written)\n"
           "dev ce sm check\n");
    for (int i = 0; i < g.n; ++i) {
        bool ok = true;
        printf("%d", i);
        put(measure({{i, i}}, CE_PUSH, &ok));
        put(measure({{i, i}}, SM_STORE, &ok));
        printf(" %s\n", verdict(ok));
    }

    if (g.n > 1) {
        double ar = 2.0 * (g.n - 1) / g.n, ag = (double) (g.n - 1) / g.n;
        printf("# summary at np %d, GB/s; busbw as nccl-tests: allreduce algbw x 2(n-1)/n = %.3f, "
               "allgather and reduce_scatter algbw x (n-1)/n = %.3f; best method each\n"
               "# one_way_min, bidir_each_min: the slowest pair alone, and each way with both at "
               "once\n"
               "# ring_busbw: a ring's busbw is what each GPU sends with every GPU sending to its "
               "successor at once (ring table)\n"
               "# direct_busbw: direct reduce-scatter/allgather (every GPU to every other at "
               "once, each byte sent once) reach a GPU's outgoing all-to-all figure\n"
               "# oneshot: every GPU reads all n-1 others' whole buffer: algbw = that figure / "
               "(n-1)\nname GBps\n",
               g.n, ar, ag);
        printf("one_way_min %.1f\nbidir_each_min %.1f\n", one_way, bidir);
        printf("ring_busbw %.1f\ndirect_busbw %.1f\n", ring, a2a);
        printf("allreduce_algbw_ring %.1f\nallreduce_algbw_direct %.1f\n", ring / ar, a2a / ar);
        printf("allreduce_algbw_oneshot %.1f\n", a2a / (g.n - 1));
        printf("allgather_algbw_ring %.1f\nallgather_algbw_direct %.1f\n", ring / ag, a2a / ag);
    }
    if (0 != g.flag[1]) {
        printf("# warning: a gate timed out: some figures include the host's launch time\n");
    }
    teardown();
    if (0 != g.wrong) {
        printf("BAD: %d rows with a wrong copy: these figures are not to be trusted\n", g.wrong);
        return 1;
    }
    return 0;
}
