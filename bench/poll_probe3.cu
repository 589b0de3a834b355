/* Can a block poll the host's descriptor with several warps without waiting for the
 * losers' reads? Session 38 (bench/poll_probe2.cu) found that 4-8 pollers see the host's
 * write 0.05-0.49 us sooner than one. In the resident kernel (826fd62), though, the warps
 * that lost still had a read over PCIe in flight, and the block's barrier before the call
 * waited for it, which ate the gain. Here every round ends with that barrier before the
 * acknowledgement, as a call's body would. Each poller's lane 0 reads in one of two ways:
 * - ld.volatile (8 bytes) into a register: a loser stalls on its read;
 * - cp.async (16 bytes) into shared memory: a loser walks away, its copy lands later in its
 *   own slot, and a sentinel tells a landed copy from one in flight.
 * Reported per layout: the host's round trip (mean, median, p90), and the rounds whose copy
 * came back stale after 1000 polls (a number the host had already replaced: a sign that a
 * cached copy of the line was read). A poller gives up after 20 ms (err).
 * Run in session 39 (bench/results/poll_probe3_2xH200_c2e74b4.txt): 8 cp.async pollers
 * 0.15-0.26 us sooner than one ld.volatile poller on the mean, 4 no sooner.
 * Build: nvcc -O2 -arch=sm_90 -o bench/poll_probe3 bench/poll_probe3.cu (session 38). */
#include "poll_probe_host.h"

static const uint64_t SENTINEL = ~0ull;

__device__ __forceinline__ uint64_t gns(void)
{
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__device__ __forceinline__ uint64_t ld_vol(const uint64_t *p)
{
    uint64_t x;
    asm volatile("ld.volatile.global.u64 %0, [%1];" : "=l"(x) : "l"(p));
    return x;
}

__device__ __forceinline__ uint64_t ld_shared_vol(const uint64_t *p)
{
    uint64_t x;
    const unsigned a = (unsigned) __cvta_generic_to_shared(p);
    asm volatile("ld.volatile.shared.u64 %0, [%1];" : "=l"(x) : "r"(a));
    return x;
}

/* 16 bytes from global (here: mapped host memory) into shared memory, not waited for */
__device__ __forceinline__ void cp_async16(uint64_t *smem, const uint64_t *g)
{
    const unsigned a = (unsigned) __cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n\tcp.async.commit_group;" ::"r"(a),
                 "l"(g)
                 : "memory");
}

/* pollers warps of the block poll copy w each (async: cp.async into a shared slot), the first
 * to see k takes it; then the block's barrier, then thread 0 acknowledges */
__global__ void probe(const uint64_t *desc, volatile uint64_t *ack, uint64_t n, int pollers,
                      int async, unsigned long long *stale, unsigned long long *err)
{
    __shared__ unsigned long long s_won;
    __shared__ __align__(16) uint64_t s_slot[8][2];
    const unsigned lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    if (0 == threadIdx.x) {
        s_won = 0;
    }
    if (threadIdx.x < 8) {
        s_slot[threadIdx.x][0] = 0;
        s_slot[threadIdx.x][1] = 0;
    }
    __syncthreads();
    bool armed = false; /* async: a copy of this warp's is in flight into its slot */
    unsigned long long nstale = 0;
    for (uint64_t k = 1; k <= n; ++k) {
        if ((int) w < pollers && 0 == lane) {
            const uint64_t *mine = desc + (size_t) w * PP_STRIDE;
            const uint64_t t0 = gns();
            for (unsigned it = 0;; ++it) {
                uint64_t q = 0;
                if (async) {
                    if (!armed) {
                        *(volatile uint64_t *) &s_slot[w][0] = SENTINEL;
                        cp_async16(s_slot[w], mine);
                        armed = true;
                    }
                    q = ld_shared_vol(&s_slot[w][0]);
                    if (SENTINEL != q) {
                        armed = false; /* landed: look at it, then poll again */
                    }
                } else {
                    q = ld_vol(mine);
                }
                if (SENTINEL != q && q >= k) {
                    if (atomicCAS(&s_won, k - 1, k) == k - 1) {
                        break; /* this warp took k */
                    }
                }
                if (SENTINEL != q && q + 1 < k && it > 1000) {
                    ++nstale;
                }
                if (*(volatile unsigned long long *) &s_won >= k) {
                    break; /* another warp took it: walk away (async: the copy lands later) */
                }
                if (0 == (it & 255) && gns() - t0 > 20000000ull) {
                    atomicAdd(err, 1ull);
                    atomicMax(&s_won, k); /* give up on k */
                    break;
                }
            }
        }
        __syncthreads(); /* the call's body would start here */
        if (0 == threadIdx.x) {
            *ack = k;
            __threadfence_system();
        }
    }
    if (0 == lane && (int) w < pollers) {
        asm volatile("cp.async.wait_all;" ::: "memory");
        atomicAdd(stale, nstale);
    }
}

int main(void)
{
    const uint64_t n = 20000;
    pp_mem m = pp_alloc();
    unsigned long long *cnt; /* stale, err */
    CK(cudaMallocManaged((void **) &cnt, 16));
    struct {
        int pollers, async;
    } v[] = {{1, 0}, {4, 0}, {4, 1}, {8, 1}, {1, 1}, {1, 0}};
    srand(1);
    for (unsigned r = 0; r < sizeof(v) / sizeof(v[0]); ++r) {
        const char *how = v[r].async ? "cp.async" : "ld.volatile";
        pp_reset(m);
        cnt[0] = cnt[1] = 0;
        CK(cudaDeviceSynchronize());
        /* 512 threads, as the resident kernel's blocks */
        probe<<<1, 512>>>(m.desc_d, m.ack_d, n, v[r].pollers, v[r].async, cnt, cnt + 1);
        CK(cudaGetLastError());
        std::vector<double> rt;
        rt.reserve(n);
        double sum = 0;
        for (uint64_t k = 1; k <= n; ++k) {
            const double t = pp_round(m, k, v[r].pollers, 1e6);
            if (t < 0) {
                printf("%d poller(s), %s: no acknowledgement within 1 s; stopping\n", v[r].pollers,
                       how);
                return 1;
            }
            rt.push_back(t);
            sum += t;
            if (200 == k && sum / k > 1000) { /* pollers giving up (err): 20 ms rounds */
                printf("%d poller(s), %s: rounds of %.0f us on average; stopping (the "
                       "pollers' timeouts?)\n",
                       v[r].pollers, how, sum / k);
                return 1;
            }
        }
        CK(cudaDeviceSynchronize());
        const pp_stats st = pp_summary(rt);
        printf("%d poller(s), %-11s: round trip mean %.3f us, median %.3f, p90 %.3f; stale %llu,"
               " err %llu\n",
               v[r].pollers, how, st.mean, st.median, st.p90, cnt[0], cnt[1]);
        fflush(stdout);
    }
    return 0;
}
