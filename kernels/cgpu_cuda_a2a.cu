/*
 * coll/gpu kernels: the alltoall (cgpu_cuda_a2a_args_t), a kernel of bytes with no
 * (type, op) instances, and its launcher.
 */
#include "cgpu_cuda_device.cuh"
#include "cgpu_cuda_launch.cuh"

namespace {

/* ---- alltoall: see cgpu_cuda_a2a_args_t. Send blocks store into the receiver's slots
 * over NVLink; receive blocks copy out of their own inbox; nothing waits on anything but
 * the one peer of its channel, so all peers are in flight at once. ---- */
/* part b of an alltoall: a send (even b) or receive channel, or a share of the own copy
 * (b >= nio); false after a timeout */
__device__ bool a2a_part(const cgpu_cuda_a2a_args_t &a, int b)
{
    const int n = a.nranks, me = a.rank;
    const int nio = 2 * (n - 1) * a.cpd;
    const uint8_t *in = (const uint8_t *) a.in;
    uint8_t *out = (uint8_t *) a.out;
    if (b >= nio) { /* own block: a plain local copy */
        const int k = b - nio;
        const size_t per = ((a.bytes + a.nself - 1) / a.nself + 15) & ~(size_t) 15;
        size_t first = (size_t) k * per, last = first + per;
        first = first < a.bytes ? first : a.bytes;
        last = last < a.bytes ? last : a.bytes;
        reduce_copy<uint8_t, CGPU_OP_SUM>(out + (size_t) me * a.bytes + first, nullptr, nullptr,
                                          in + (size_t) me * a.bytes + first, last - first);
        return true;
    }
    const bool sender = 0 == (b & 1);
    const int idx = b >> 1, d = 1 + idx / a.cpd, j = idx % a.cpd;
    const int c = (d - 1) * a.cpd_max + j;
    const int peer = sender ? wrap(me - d, n) : wrap(me + d, n);
    uint64_t *myf = (uint64_t *) a.inbox[me];
    uint64_t *pf = (uint64_t *) a.inbox[peer];
    const size_t rfirst = (size_t) j * a.region;
    for (int k = 0; k < a.nchunks; ++k) {
        const uint64_t item = a.base[c] + (uint64_t) k;
        size_t first = rfirst + (size_t) k * a.chunk, last = first + a.chunk;
        const size_t rlast = rfirst + a.region;
        last = last < rlast ? last : rlast;
        first = first < a.bytes ? first : a.bytes;
        last = last < a.bytes ? last : a.bytes;
        last = last > first ? last : first;
        const size_t slot = ((size_t) c * a.nslots + item % a.nslots) * a.slot_bytes;
        if (sender) {
            if (item >= (uint64_t) a.nslots &&
                !block_wait_ge(myf + CGPU_CUDA_FLAG_A2A_CONSUMED(c), item + 1 - a.nslots,
                               a.timeout_ns, a.err, CGPU_CUDA_ERR_A2A_CONSUMED, peer)) {
                return false;
            }
            reduce_copy<uint8_t, CGPU_OP_SUM>((uint8_t *) a.inbox[peer] + a.a2a_off + slot, nullptr,
                                              nullptr, in + (size_t) peer * a.bytes + first,
                                              last - first);
            block_publish(pf + CGPU_CUDA_FLAG_A2A_POSTED(c), item + 1);
        } else {
            if (!block_wait_ge(myf + CGPU_CUDA_FLAG_A2A_POSTED(c), item + 1, a.timeout_ns, a.err,
                               CGPU_CUDA_ERR_A2A_POSTED, peer)) {
                return false;
            }
            reduce_copy<uint8_t, CGPU_OP_SUM>(out + (size_t) peer * a.bytes + first, nullptr,
                                              (const uint8_t *) a.inbox[me] + a.a2a_off + slot,
                                              nullptr, last - first);
            __syncthreads();
            if (0 == threadIdx.x) {
                store_flag(pf + CGPU_CUDA_FLAG_A2A_CONSUMED(c), item + 1);
            }
        }
    }
    return true;
}

/* even grids (CGPU_CUDA_GRID_DOC): a channel's send and receive run at once */
__global__ void a2a_kernel(const cgpu_cuda_a2a_args_t a)
{
    const int parts = 2 * (a.nranks - 1) * a.cpd + a.nself;
    CGPU_EACH_PART((int) blockIdx.x, parts, (int) gridDim.x, a2a_part(a, part_));
}

} /* namespace */

int cgpu_cuda_a2a_preload(void)
{
    load_kernel(a2a_kernel);
    return (int) cudaGetLastError();
}

extern "C" int cgpu_cuda_a2a_launch(const cgpu_cuda_a2a_args_t *a, int threads, void *stream)
{
    static std::atomic<unsigned long long> fitc{0};
    const int fit = cached_fit(fitc, a2a_kernel, threads);
    const int blocks = grid_of(a->grid, 2 * (a->nranks - 1) * a->cpd + a->nself, 2);
    a2a_kernel<<<blocks, fit, 0, (cudaStream_t) stream>>>(*a);
    return (int) cudaGetLastError();
}
