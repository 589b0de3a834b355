/* Host -> kernel -> host ping-pong through mapped host memory with several pollers: does a
 * second poller (another warp of the same block, or a warp on another SM) see the host's
 * descriptor sooner than one? The host writes the call number into every poller's own
 * 64-byte copy of the descriptor at a random time (0-3 us after the previous round's
 * acknowledgement), each poller reads its copy in one 64-byte request (lanes 0-3, 16 bytes
 * each, as the resident kernel reads its descriptor), pollers start their reads spread
 * over one round trip, and the first to see the number writes the acknowledgement the host
 * waits for. Reported: the host's round trip, mean, median and minimum, per layout.
 * Build: nvcc -O2 -arch=sm_90 -o bench/poll_probe2 bench/poll_probe2.cu (session 38). */
#include "poll_probe_host.h"

__device__ __forceinline__ void ld16(const void *p, uint64_t &x, uint64_t &y)
{
    asm volatile("ld.volatile.global.v2.u64 {%0, %1}, [%2];" : "=l"(x), "=l"(y) : "l"(p));
}

/* poller w (warp w of block 0 when per_block is 0, else warp 0 of block w) polls copy w */
__global__ void pollers(const uint64_t *desc, size_t stride_words, unsigned long long *got,
                        volatile uint64_t *ack, uint64_t n, unsigned stagger_ns, int per_block)
{
    const unsigned lane = threadIdx.x & 31;
    const unsigned w = per_block ? blockIdx.x : threadIdx.x >> 5;
    const uint64_t *mine = desc + w * stride_words;
    if (w) {
        __nanosleep(w * stagger_ns);
    }
    for (uint64_t k = 1; k <= n;) {
        uint64_t q = 0, f = 0;
        if (lane < 4) {
            ld16(mine + 2 * lane, q, f);
        }
        q = __shfl_sync(0xffffffffu, q, 0);
        if (q >= k) {
            if (0 == lane && atomicMax(got, (unsigned long long) q) < q) {
                *ack = q;
                __threadfence_system();
            }
            k = q + 1;
        }
    }
}

int main(void)
{
    const uint64_t n = 20000;
    pp_mem m = pp_alloc();
    unsigned long long *got;
    CK(cudaMalloc((void **) &got, 8));
    struct {
        int pollers, per_block;
        unsigned stagger;
    } v[] = {{1, 0, 0},   {2, 0, 700}, {4, 0, 350}, {2, 1, 700},
             {4, 1, 350}, {8, 1, 175}, {2, 1, 0},   {1, 0, 0}};
    srand(1);
    for (unsigned r = 0; r < sizeof(v) / sizeof(v[0]); ++r) {
        pp_reset(m);
        CK(cudaMemset(got, 0, 8));
        CK(cudaDeviceSynchronize());
        const int p = v[r].pollers;
        if (v[r].per_block) {
            pollers<<<p, 32>>>(m.desc_d, PP_STRIDE, got, m.ack_d, n, v[r].stagger, 1);
        } else {
            pollers<<<1, 32 * p>>>(m.desc_d, PP_STRIDE, got, m.ack_d, n, v[r].stagger, 0);
        }
        CK(cudaGetLastError());
        std::vector<double> rt;
        rt.reserve(n);
        for (uint64_t k = 1; k <= n; ++k) {
            rt.push_back(pp_round(m, k, p, 0));
        }
        CK(cudaDeviceSynchronize());
        const pp_stats st = pp_summary(rt);
        printf("%d poller(s) %s, stagger %4u ns: round trip mean %.3f us, median %.3f, min %.3f,"
               " p90 %.3f\n",
               p, v[r].per_block ? "one per block" : "warps of one block", v[r].stagger, st.mean,
               st.median, st.min, st.p90);
        fflush(stdout);
    }
    return 0;
}
