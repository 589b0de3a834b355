/*
 * coll/gpu kernels: the resident oneshot kernel, which stays on the device between calls
 * and takes each from a descriptor the host writes (cgpu_cuda_resident_args_t), and the
 * launch of its instances of one type group, which each group's object
 * (cgpu_cuda_resident_<group>.cu) instantiates: over every instance at once, ptxas takes
 * minutes an architecture.
 */
#ifndef CGPU_CUDA_RESIDENT_CUH
#define CGPU_CUDA_RESIDENT_CUH

#include <cooperative_groups.h>

#include "cgpu_cuda_device.cuh"
#include "cgpu_cuda_oneshot_body.cuh"
#include "cgpu_cuda_launch.cuh"

namespace {

/* ---- resident oneshot calls: the kernel stays on the device between calls and takes
 * each call from a descriptor the host writes into mapped host memory, so a small call
 * costs no launch and no stream synchronize. Block 0's warp 0 polls the descriptor (its
 * four 16-byte parts each carry a tag made of the descriptor's number and the part's field:
 * one 64-byte read over PCIe takes a whole, checked descriptor) and hands it on in the same
 * form (a mailbox of four tagged parts) to the blocks that work on the call; every working
 * block runs its part of the oneshot protocol above (the same inbox slots, flags and call
 * numbers as a launched oneshot, so a peer may run either) and then publishes the number
 * in its own completion word, which the host reads. Block 0 alone decides that the kernel
 * ends (after idle_ns without a descriptor, or on an exit descriptor): it hands the end to
 * every block, so no block ever takes a call block 0 has given up (the host launches the
 * kernel again from the number it was waiting for). ---- */

__device__ __forceinline__ void load16_volatile(const void *p, uint64_t &x, uint64_t &y)
{
    asm volatile("ld.volatile.global.v2.u64 {%0, %1}, [%2];" : "=l"(x), "=l"(y) : "l"(p));
}

/* a mailbox part, generic address (this block's shared memory, another block's through the
 * cluster's window, or device memory) */
__device__ __forceinline__ void load16_volatile_any(const void *p, uint64_t &x, uint64_t &y)
{
    asm volatile("ld.volatile.v2.u64 {%0, %1}, [%2];" : "=l"(x), "=l"(y) : "l"(p) : "memory");
}
__device__ __forceinline__ void store16_volatile_any(void *p, uint64_t x, uint64_t y)
{
    asm volatile("st.volatile.v2.u64 [%0], {%1, %2};" ::"l"(p), "l"(x), "l"(y) : "memory");
}

/* Compute capability 9.0 and later: the kernel is one thread block cluster (at most 8
 * blocks, CGPU_CUDA_RESIDENT_CLUSTER_BLOCKS) and block 0 stores each call straight into the
 * mailboxes in the working blocks' shared memory (distributed shared memory), where they
 * poll without leaving their SM. Before 9.0 (or with coll_gpu_cuda_resident_cluster off),
 * one mailbox in device memory (a.state) serves every block. Mailboxes, not barriers:
 * handing each call on through the cluster's barrier and waiting at a second barrier for
 * every block to be done costs 0.9-1.0 us per call of several blocks (0.1 for one block). */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define CGPU_RK_CLUSTER 1
__device__ __forceinline__ void cluster_sync_all()
{
    asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
    asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
}
/* a call's four tagged parts (number n, fields f) into the mailboxes of this cluster's
 * blocks 1 .. count - 1, one part a lane of the calling warp */
__device__ __forceinline__ void cluster_hand_on(const cooperative_groups::cluster_group &cl,
                                                uint64_t *s_mb, const uint64_t *f, uint64_t n,
                                                int count, unsigned lane)
{
    for (int l = (int) lane; l < 4 * (count - 1); l += 32) {
        const uint64_t g = f[l & 3];
        store16_volatile_any(cl.map_shared_rank(s_mb, 1 + (l >> 2)) + 2 * (l & 3),
                             n ^ cgpu_cuda_resident_mix(g), g);
    }
}
#else
#define CGPU_RK_CLUSTER 0
#endif

/* the blocks a descriptor's call runs on (the end: every block) */
__device__ __forceinline__ int resident_nb(bool ex, uint64_t f2)
{
    return ex ? (int) gridDim.x : (int) (f2 >> CGPU_CUDA_RESIDENT_BLOCKS_SHIFT & 0xff);
}

/* 512 threads a block, coll_gpu_cuda_threads' default (the launch clamps a larger request):
 * left to itself the compiler gives this kernel 168-173 registers a thread, so it could
 * launch only 384, and a 4 KiB block's 512 LL lines would take the batched LL path. The
 * kernel's phases time the same either way on 2x H200, and the LL default of 32 KiB is
 * tuned with 512. */
template <typename T, int OP>
__global__ void __launch_bounds__(512, 1) resident_kernel(const cgpu_cuda_resident_args_t a)
{
    __shared__ __align__(16) uint64_t s_mb[8]; /* this block's mailbox (clusters) */
    __shared__ uint64_t s_f[4], s_k;
    __shared__ int s_exit;
    __shared__ uint64_t s_ts[2]; /* block 0's stamps inside the oneshot body (trace) */
    /* the call's arguments, one copy a block in shared memory: a copy of each thread's own
     * (a run-time index into inbox[] puts it in local memory) cost the oneshot body a chain
     * of local loads on every call */
    __shared__ cgpu_cuda_oneshot_args_t s_o;
    if (0 == threadIdx.x) {
        s_o = a.o; /* the call's fields are written before each call's barrier below */
        s_o.gate_ns = a.idle_ns; /* a gate shut this long gives the call back (call_gate) */
        s_o.verdict = a.state + CGPU_CUDA_RESIDENT_VERDICT;
    }
    /* block 0 gave a gated call back (its gate stayed shut): it ends the kernel as an idle
     * one does, with the call's number, so the host launches it again from that call */
    bool given_back = false;
    uint64_t t_idle = global_ns(), t_seen = 0, t_fwd = 0;
    /* a.cluster: launched as one cluster (compute capability 9.0 and later, unless
     * coll_gpu_cuda_resident_cluster is off) */
    const bool clustered = CGPU_RK_CLUSTER && 0 != a.cluster;
    /* with clusters: the blocks of each cluster (cs), and whether this block is the first of
     * a cluster other than block 0's (a leader: it takes the calls of more than cs blocks,
     * and the end, from the mailbox in device memory and hands them on in its cluster) */
    unsigned cs = 0;
    bool leader = false;
#if CGPU_RK_CLUSTER
    cooperative_groups::cluster_group cl = cooperative_groups::this_cluster();
    if (clustered) {
        cs = cl.num_blocks();
        leader = 0 != blockIdx.x && 0 == cl.block_rank();
        if (threadIdx.x < 8) {
            s_mb[threadIdx.x] = 0; /* an earlier launch's parts may still be here */
        }
        cluster_sync_all(); /* every mailbox is clear before a block stores into one */
    }
#endif
    if ((0 == blockIdx.x || leader) && 0 == threadIdx.x && nullptr != a.placed) {
        /* the host holds other launches back until every cluster runs (a word each) */
        store_release_sys(a.placed + (clustered ? blockIdx.x / cs : 0), a.start);
    }
    /* a.state: zeroed before the launch */
    uint64_t *const mine = clustered && !leader ? s_mb : a.state;
    /* block 0: the descriptor it waits for; the others: the least number they may take (they
     * skip the calls they have no part in) */
    for (uint64_t k = a.start;; ++k) {
        if (threadIdx.x < 32) {
            const unsigned lane = threadIdx.x;
            if (0 == blockIdx.x) {
                /* warp 0 polls: lanes 0-3 read one 16-byte part each, one 64-byte read over
                 * PCIe per poll */
                for (unsigned it = 0;; ++it) {
                    uint64_t q = 0, f = 0;
                    if (lane < 4 && !given_back) {
                        load16_volatile(a.desc + 2 * lane, q, f);
                    }
                    if (!given_back &&
                        __all_sync(0xffffffffu,
                                   lane >= 4 || (q ^ cgpu_cuda_resident_mix(f)) == k)) {
                        if (lane < 4) {
                            s_f[lane] = f;
                        }
                        if (0 == lane && nullptr != a.trace) {
                            t_seen = global_ns();
                            a.trace[CGPU_CUDA_RK_TRACE_POLLS] += it + 1;
                            a.trace[CGPU_CUDA_RK_TRACE_IDLE] += t_seen - t_idle;
                        }
                        break;
                    }
                    int idle = 0;
                    if (0 == lane && 0 == (it & 3)) { /* a poll: ~1 us */
                        idle = given_back || global_ns() - t_idle > a.idle_ns;
                    }
                    if (__shfl_sync(0xffffffffu, idle, 0)) {
                        if (lane < 4) { /* the end, as an exit descriptor would say */
                            s_f[lane] = 2 == lane ? CGPU_CUDA_RESIDENT_EXIT : 0;
                        }
                        break;
                    }
                }
                __syncwarp();
                const int ex = 0 != (s_f[2] & CGPU_CUDA_RESIDENT_EXIT);
                if (0 == lane) {
                    s_exit = ex;
                }
                /* hand the call on to the blocks that work on it (the end: to every block),
                 * one 16-byte part per lane */
                const int nb = resident_nb(ex, s_f[2]);
                /* the mailbox in device memory: every other block without clusters, the
                 * other clusters' leaders with them */
                if ((clustered ? nb > (int) cs : nb > 1) && lane < 4) {
                    store16_volatile_any(a.state + 2 * lane, k ^ cgpu_cuda_resident_mix(s_f[lane]),
                                         s_f[lane]);
                }
#if CGPU_RK_CLUSTER
                if (clustered) { /* block 0's cluster's share */
                    cluster_hand_on(cl, s_mb, s_f, k, nb < (int) cs ? nb : (int) cs, lane);
                }
#endif
                if (0 == lane && nullptr != a.trace) {
                    t_fwd = global_ns();
                }
            } else {
                /* lanes 0-3 poll this block's mailbox: a whole one (the four parts tell the
                 * same number) of at least k */
                for (;;) {
                    uint64_t q = 0, f = 0, n = 0;
                    if (lane < 4) {
                        load16_volatile_any(mine + 2 * lane, q, f);
                        n = q ^ cgpu_cuda_resident_mix(f);
                    }
                    const uint64_t n0 = __shfl_sync(0xffffffffu, n, 0);
                    if (__all_sync(0xffffffffu, lane >= 4 || (n == n0 && n0 >= k))) {
                        if (lane < 4) {
                            s_f[lane] = f;
                        }
                        __syncwarp();
                        const bool ex = 0 != (s_f[2] & CGPU_CUDA_RESIDENT_EXIT);
                        if (0 == lane) {
                            s_k = n0;
                            s_exit = ex;
                        }
#if CGPU_RK_CLUSTER
                        if (leader) { /* on to the blocks of this cluster that work on it */
                            const int left = resident_nb(ex, s_f[2]) - (int) blockIdx.x;
                            cluster_hand_on(cl, s_mb, s_f, n0, left < (int) cs ? left : (int) cs,
                                            lane);
                        }
#endif
                        break;
                    }
                }
            }
            if (0 == lane) { /* s_f is this warp's (after its __syncwarp) */
                s_o.in = (const void *) s_f[0];
                s_o.out = (void *) s_f[1];
                s_o.count = (size_t) (s_f[2] & CGPU_CUDA_RESIDENT_COUNT_MASK);
                s_o.mode = (int) (s_f[2] >> CGPU_CUDA_RESIDENT_MODE_SHIFT & 0xff);
                s_o.nblocks = (int) (s_f[2] >> CGPU_CUDA_RESIDENT_BLOCKS_SHIFT & 0xff);
                s_o.root = (int) (s_f[2] >> CGPU_CUDA_RESIDENT_ROOT_SHIFT & 0x7f);
                s_o.seq = s_f[3];
                s_o.gate = 0 != (s_f[2] & CGPU_CUDA_RESIDENT_GATED) ? a.gate : nullptr;
                s_o.gate_val = 0 == blockIdx.x ? k : s_k;
            }
        }
        __syncthreads();
        if (0 != blockIdx.x) {
            k = s_k;
        }
        if (s_exit) {
#if CGPU_RK_CLUSTER
            if (clustered) {
                cluster_sync_all(); /* stores into the others' shared memory are done */
            }
#endif
            if (0 == blockIdx.x && 0 == threadIdx.x) {
                __threadfence_system();
                store_flag(a.exited, given_back ? k - 1 : k); /* k - 1: the call given back */
            }
            return;
        }
        const bool traced = nullptr != a.trace && 0 == blockIdx.x;
        if ((int) blockIdx.x < s_o.nblocks) {
            if (!oneshot_body<T, OP>(s_o, (int) blockIdx.x, traced ? s_ts : nullptr)) {
                /* given back at its gate (every block of the call alike): no completion;
                 * block 0's next round ends the kernel (descriptor k + 1 to the others,
                 * which wait for one past k; this call's number to the host) */
                given_back = true;
                __syncthreads(); /* s_f, s_k and s_exit are read (as below) */
                t_idle = global_ns();
                continue;
            }
            __syncthreads(); /* every thread's part of the result, before the release */
            if (0 == threadIdx.x) {
                const uint64_t t_body = traced ? global_ns() : 0;
                /* GPU scope: the host reads only this word, and the result went to this
                 * device's memory, which whatever the application does next reads through
                 * this GPU's L2 (the peers' inboxes are the protocol's business, with its own
                 * system-scope releases) */
                store_release_gpu(a.completed + blockIdx.x, k);
                if (traced) {
                    const uint64_t t_done = global_ns();
                    unsigned long long *tr = a.trace;
                    tr[CGPU_CUDA_RK_TRACE_CALLS] += 1;
                    tr[CGPU_CUDA_RK_TRACE_HANDOFF] += t_fwd - t_seen;
                    tr[CGPU_CUDA_RK_TRACE_WRITE] += s_ts[0] - t_fwd;
                    tr[CGPU_CUDA_RK_TRACE_PEERS] += s_ts[1] - s_ts[0];
                    tr[CGPU_CUDA_RK_TRACE_REDUCE] += t_body - s_ts[1];
                    tr[CGPU_CUDA_RK_TRACE_DONE] += t_done - t_body;
                }
            }
        }
        __syncthreads(); /* s_f, s_k and s_exit are read before warp 0 writes them again */
        t_idle = global_ns();
    }
}

template <typename T, int OP> struct ResidentK {
    static void go(const cgpu_cuda_resident_args_t *a, int blocks, int threads, cudaStream_t st)
    {
        static std::atomic<unsigned long long> fitc{0};
        const int fit = cached_fit(fitc, resident_kernel<T, OP>, threads);
        if (!a->cluster) {
            resident_kernel<T, OP><<<blocks, fit, 0, st>>>(*a);
            return;
        }
        cudaLaunchConfig_t cfg = {};
        cudaLaunchAttribute at[1];
        at[0].id = cudaLaunchAttributeClusterDimension;
        /* the whole grid one cluster, or clusters of CGPU_CUDA_RESIDENT_CLUSTER_BLOCKS */
        at[0].val.clusterDim.x = (unsigned) (blocks < CGPU_CUDA_RESIDENT_CLUSTER_BLOCKS
                                                 ? blocks
                                                 : CGPU_CUDA_RESIDENT_CLUSTER_BLOCKS);
        at[0].val.clusterDim.y = 1;
        at[0].val.clusterDim.z = 1;
        cfg.gridDim = dim3((unsigned) blocks);
        cfg.blockDim = dim3((unsigned) fit);
        cfg.stream = st;
        cfg.attrs = at;
        cfg.numAttrs = 1;
        (void) cudaLaunchKernelEx(&cfg, resident_kernel<T, OP>, *a); /* its error: last error */
    }
    static void load()
    {
        load_kernel(resident_kernel<T, OP>);
    }
};

} /* namespace */

/* a launch of (dt, op) of type group G */
template <int G>
int cgpu_cuda_resident_types(const cgpu_cuda_resident_args_t *a, cgpu_dtype_t dt, cgpu_op_t op,
                             int blocks, int threads, cudaStream_t st)
{
    return dispatch_types<G, ResidentK>(a, dt, op, blocks, threads, st);
}

/* every instance of type group G loaded */
template <int G> int cgpu_cuda_resident_types_preload(void)
{
    return preload_family<ResidentK, G>();
}

#endif /* CGPU_CUDA_RESIDENT_CUH */
