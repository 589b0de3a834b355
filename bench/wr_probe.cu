/* Where does the resident kernel's "write" phase go? The trace (coll_gpu_verbose 10) gives an
 * 8-byte LL allreduce 0.9 us from the hand-off to the end of its sends on 2x H200: one thread
 * loads the 8 input bytes (__ldcg), 128 threads each store a 16-byte LL line into the peer's
 * inbox (the class's 128 lines, zeros past the data), then the block's barrier. This probe
 * times each piece alone in a block of 512 threads that takes rounds from the host as the
 * resident kernel does (one warp polls a descriptor in mapped host memory), then releases a
 * completion word in mapped host memory (st.release.gpu, as the kernel does):
 *   none       nothing between the two stamps
 *   load       thread 0 loads 8 bytes of a device buffer (the same each round)
 *   peer128    threads 0-127 store a 16-byte line each to GPU 1 (peer access)
 *   load+peer  both (the kernel's write phase)
 *   local128   threads 0-127 store to GPU 0's own memory
 *   peer1      thread 0 alone stores one line to GPU 1
 *   lmem       three dependent loads of a thread's array in local memory (written at the
 *              kernel's start), as the kernel reads its copy of the call's arguments
 *   lmem-norel the same with a plain volatile store for the completion (no release)
 * Per variant: the mean of the write phase (globaltimer ns and SM cycles), of the completion's
 * release, and the host's round trip; plus the globaltimer's smallest step.
 * Build and run on the GPU machine (two GPUs): nvcc -O2 -arch=sm_90 -o bench/wr_probe
 * bench/wr_probe.cu && bench/wr_probe
 * Session 40 (bench/results/wr_probe_2xH200.txt): load+peer 0.22 us, against the kernel's
 * 0.9; three dependent local loads 0.15 us; the release 0.31 us (0.05 for a plain store),
 * 0.3 us of the host's round trip. */
#include "poll_probe_host.h"

__device__ __forceinline__ uint64_t gns(void)
{
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

enum { V_NONE, V_LOAD, V_PEER128, V_LOADPEER, V_LOCAL128, V_PEER1, V_LMEM, V_LMEM_NOREL, V_COUNT };
static const char *vname[V_COUNT] = {"none",     "load",  "peer128", "load+peer",
                                     "local128", "peer1", "lmem",    "lmem-norel"};

struct sums {
    unsigned long long wr_ns, wr_cyc, rel_ns, rounds, sink;
};

__global__ void probe(const uint64_t *desc, uint64_t *ack, uint64_t n, int v,
                      const uint64_t *in, uint4 *peer, uint4 *local, sums *s)
{
    __shared__ uint64_t s_v;
    unsigned long long wr_ns = 0, wr_cyc = 0, rel_ns = 0, sink = 0;
    /* a thread's array indexed at run time: local memory, written once here */
    uint64_t lm[48];
    for (int i = 0; i < 48; ++i) {
        lm[i] = (uint64_t) (i * 7 + (int) threadIdx.x) % 48;
    }
    for (uint64_t k = 1; k <= n; ++k) {
        if (threadIdx.x < 32) {
            for (;;) {
                uint64_t q = 0;
                if (0 == threadIdx.x) {
                    asm volatile("ld.volatile.global.u64 %0, [%1];" : "=l"(q) : "l"(desc));
                }
                if (__shfl_sync(0xffffffffu, q, 0) >= k) {
                    break;
                }
            }
        }
        __syncthreads();
        const uint64_t t1 = gns();
        const long long c1 = clock64();
        uint64_t x = 0;
        if ((V_LOAD == v || V_LOADPEER == v) && 0 == threadIdx.x) {
            x = __ldcg((const unsigned long long *) in);
        }
        const uint32_t num = (uint32_t) k;
        if ((V_PEER128 == v || V_LOADPEER == v || V_LOCAL128 == v) && threadIdx.x < 128) {
            uint4 *dst = (V_LOCAL128 == v ? local : peer) + (k & 1) * 128 + threadIdx.x;
            asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(dst),
                         "r"((uint32_t) x), "r"(num), "r"((uint32_t) (x >> 32)), "r"(num)
                         : "memory");
        } else if (V_PEER1 == v && 0 == threadIdx.x) {
            asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(peer + (k & 1)),
                         "r"((uint32_t) x), "r"(num), "r"((uint32_t) (x >> 32)), "r"(num)
                         : "memory");
        } else if (V_LOAD == v && 0 == threadIdx.x) {
            s_v = x; /* the load's value is used */
        } else if (V_LMEM == v || V_LMEM_NOREL == v) {
            /* three dependent loads of local memory, as the kernel's arguments (its copy of
             * them is in local memory) are read */
            const uint64_t a = lm[(k + threadIdx.x) % 48], b = lm[a % 48], c = lm[b % 48];
            if (0 == threadIdx.x) {
                s_v = c;
            }
        }
        __syncthreads();
        if (0 == threadIdx.x) {
            const uint64_t t2 = gns();
            const long long c2 = clock64();
            if (V_LMEM_NOREL == v) { /* no release: does the release drop L1's lines? */
                asm volatile("st.volatile.global.u64 [%0], %1;" ::"l"(ack), "l"(k) : "memory");
            } else {
                asm volatile("st.release.gpu.global.u64 [%0], %1;" ::"l"(ack), "l"(k) : "memory");
            }
            const uint64_t t3 = gns();
            if (k > 100) {
                wr_ns += t2 - t1;
                wr_cyc += (unsigned long long) (c2 - c1);
                rel_ns += t3 - t2;
            }
            sink += s_v;
        }
    }
    if (0 == threadIdx.x) {
        s->wr_ns = wr_ns;
        s->wr_cyc = wr_cyc;
        s->rel_ns = rel_ns;
        s->rounds = n - 100;
        s->sink = sink;
    }
}

/* the smallest nonzero step of %globaltimer seen in 100000 reads */
__global__ void tick(unsigned long long *out)
{
    uint64_t prev = gns(), best = ~0ull;
    for (int i = 0; i < 100000; ++i) {
        const uint64_t t = gns();
        if (t != prev && t - prev < best) {
            best = t - prev;
        }
        prev = t;
    }
    *out = best;
}

int main(void)
{
    const uint64_t n = 20000;
    int ndev = 0, can = 0;
    CK(cudaGetDeviceCount(&ndev));
    if (ndev < 2) {
        printf("wr_probe: needs two GPUs (found %d)\n", ndev);
        return 1;
    }
    CK(cudaDeviceCanAccessPeer(&can, 0, 1));
    if (!can) {
        printf("wr_probe: GPU 0 cannot access GPU 1\n");
        return 1;
    }
    uint4 *peer = NULL;
    CK(cudaSetDevice(1));
    CK(cudaMalloc((void **) &peer, 256 * sizeof(uint4)));
    CK(cudaMemset(peer, 0, 256 * sizeof(uint4)));
    CK(cudaDeviceSynchronize());
    CK(cudaSetDevice(0));
    CK(cudaDeviceEnablePeerAccess(1, 0));
    pp_mem m = pp_alloc();
    uint64_t *in = NULL;
    uint4 *local = NULL;
    sums *s = NULL;
    unsigned long long *t = NULL;
    CK(cudaMalloc((void **) &in, 64));
    CK(cudaMemset(in, 1, 64));
    CK(cudaMalloc((void **) &local, 256 * sizeof(uint4)));
    CK(cudaMallocManaged((void **) &s, sizeof(sums)));
    CK(cudaMallocManaged((void **) &t, 8));
    tick<<<1, 1>>>(t);
    CK(cudaDeviceSynchronize());
    printf("globaltimer: smallest step %llu ns\n", *t);
    int clk = 0;
    CK(cudaDeviceGetAttribute(&clk, cudaDevAttrClockRate, 0));
    srand(1);
    for (int pass = 0; pass < 2; ++pass) {
        for (int v = 0; v < V_COUNT; ++v) {
            pp_reset(m);
            CK(cudaDeviceSynchronize());
            probe<<<1, 512>>>(m.desc_d, m.ack_d, n, v, in, peer, local, s);
            CK(cudaGetLastError());
            std::vector<double> rt;
            rt.reserve(n);
            for (uint64_t k = 1; k <= n; ++k) {
                const double r = pp_round(m, k, 1, 1e6);
                if (r < 0) {
                    printf("%s: no acknowledgement within 1 s\n", vname[v]);
                    return 1;
                }
                rt.push_back(r);
            }
            CK(cudaDeviceSynchronize());
            const pp_stats st = pp_summary(rt);
            const double r = (double) s->rounds;
            printf("pass %d %-10s write %.3f us (%.0f cycles = %.3f us at %d MHz), release %.3f "
                   "us; host round trip mean %.3f, median %.3f\n",
                   pass, vname[v], s->wr_ns / r * 1e-3, s->wr_cyc / r,
                   s->wr_cyc / r / (clk * 1e-3), clk / 1000, s->rel_ns / r * 1e-3, st.mean,
                   st.median);
            fflush(stdout);
        }
    }
    return 0;
}
