/*
 * coll/gpu kernels: the tree allreduce (a binary tree rooted at rank 0, reduce up and
 * broadcast down, pipelined in chunks) and its launcher.
 */
#include "cgpu_cuda_device.cuh"
#include "cgpu_cuda_launch.cuh"

namespace {

/* ---- tree allreduce: block 2c reduces channel c up a binary tree rooted at rank 0 (the
 * root also starts the broadcast), block 2c+1 carries the broadcast down. Reduce and
 * broadcast of different chunks overlap; a rank's broadcast block only ever writes a
 * chunk of `out` after the root has its contribution to it, so in place is safe. ---- */

__device__ __forceinline__ char *tree_slot(char *inbox, const cgpu_cuda_tree_args_t &a, int c,
                                           int port, uint64_t item)
{
    return inbox + a.tree_off +
           (((size_t) c * CGPU_CUDA_TREE_PORTS + port) * a.nslots + item % a.nslots) * a.slot_bytes;
}

/* part 2c + role of a tree allreduce; false after a timeout */
template <typename T, int OP> __device__ bool tree_part(const cgpu_cuda_tree_args_t &a, int part)
{
    const int c = part / 2, role = part % 2, r = a.rank;
    const int parent = 0 == r ? -1 : (r - 1) / 2;
    const int me_as_child = 0 == r ? 0 : (r - 1) - 2 * parent; /* 0 or 1 */
    int nkids = 0;
    for (int j = 0; j < 2; ++j) {
        nkids += nullptr != a.child_inbox[j];
    }
    uint64_t *myf = (uint64_t *) a.my_inbox;
    const T *in = (const T *) a.in;
    T *out = (T *) a.out;
    const uint64_t base = a.base[c];
    if (1 == role && parent < 0) {
        return true; /* the root's reduce block starts the broadcast itself */
    }
    for (int k = 0; k < a.nchunks; ++k) {
        const uint64_t item = base + k;
        size_t first = (size_t) c * a.region + (size_t) k * a.chunk;
        size_t last = first + a.chunk;
        const size_t rend = ((size_t) c + 1) * a.region;
        last = last < rend ? last : rend;
        first = first < a.count ? first : a.count;
        last = last < a.count ? last : a.count;
        last = last > first ? last : first;
        const size_t cnt = last - first;
        T *down[2] = {nullptr, nullptr};

        if (0 == role) {
            /* inputs from the children */
            const T *kid[2] = {nullptr, nullptr};
            for (int j = 0; j < nkids; ++j) {
                if (!block_wait_ge(myf + CGPU_CUDA_FLAG_TREE_POSTED(c, j), item + 1, a.timeout_ns,
                                   a.err, CGPU_CUDA_ERR_TREE_POSTED, c)) {
                    return false;
                }
                kid[j] = (const T *) tree_slot(a.my_inbox, a, c, j, item);
            }
            /* where the partial (or, at the root, final) result goes */
            T *up = nullptr;
            if (parent >= 0) {
                if (item >= (uint64_t) a.nslots &&
                    !block_wait_ge(myf + CGPU_CUDA_FLAG_TREE_CONSUMED(c, 0), item + 1 - a.nslots,
                                   a.timeout_ns, a.err, CGPU_CUDA_ERR_TREE_CONSUMED, c)) {
                    return false;
                }
                up = (T *) tree_slot(a.parent_inbox, a, c, me_as_child, item);
            } else {
                for (int j = 0; j < nkids; ++j) {
                    if (item >= (uint64_t) a.nslots &&
                        !block_wait_ge(myf + CGPU_CUDA_FLAG_TREE_CONSUMED(c, 1 + j),
                                       item + 1 - a.nslots, a.timeout_ns, a.err,
                                       CGPU_CUDA_ERR_TREE_CONSUMED, c)) {
                        return false;
                    }
                    down[j] = (T *) tree_slot(a.child_inbox[j], a, c, 2, item);
                }
            }
            T *d_local = parent >= 0 ? nullptr : out + first;
            if (0 == nkids) {
                reduce_copy<T, OP>(up, nullptr, nullptr, in + first, cnt);
            } else if (1 == nkids) {
                reduce_copy<T, OP>(parent >= 0 ? up : d_local, down[0], kid[0], in + first, cnt);
            } else {
                /* two children: kid0 op in into out (scratch until the broadcast brings
                 * the final chunk), then kid1 op that to its destinations */
                reduce_copy<T, OP>(out + first, nullptr, kid[0], in + first, cnt);
                __syncthreads();
                reduce_copy<T, OP>(parent >= 0 ? up : d_local, down[0], kid[1], out + first, cnt,
                                   down[1]);
            }
            __syncthreads();
            if (0 == threadIdx.x) {
                if (parent >= 0) {
                    store_release_sys((uint64_t *) a.parent_inbox +
                                          CGPU_CUDA_FLAG_TREE_POSTED(c, me_as_child),
                                      item + 1);
                } else {
                    for (int j = 0; j < nkids; ++j) {
                        store_release_sys((uint64_t *) a.child_inbox[j] +
                                              CGPU_CUDA_FLAG_TREE_POSTED(c, 2),
                                          item + 1);
                    }
                }
                for (int j = 0; j < nkids; ++j) { /* children's slots are free again */
                    store_release_sys((uint64_t *) a.child_inbox[j] +
                                          CGPU_CUDA_FLAG_TREE_CONSUMED(c, 0),
                                      item + 1);
                }
            }
        } else {
            /* broadcast: take the final chunk from the parent, keep it, pass it down */
            if (!block_wait_ge(myf + CGPU_CUDA_FLAG_TREE_POSTED(c, 2), item + 1, a.timeout_ns,
                               a.err, CGPU_CUDA_ERR_TREE_POSTED, c)) {
                return false;
            }
            const T *src = (const T *) tree_slot(a.my_inbox, a, c, 2, item);
            for (int j = 0; j < nkids; ++j) {
                if (item >= (uint64_t) a.nslots &&
                    !block_wait_ge(myf + CGPU_CUDA_FLAG_TREE_CONSUMED(c, 1 + j),
                                   item + 1 - a.nslots, a.timeout_ns, a.err,
                                   CGPU_CUDA_ERR_TREE_CONSUMED, c)) {
                    return false;
                }
                down[j] = (T *) tree_slot(a.child_inbox[j], a, c, 2, item);
            }
            reduce_copy<T, OP>(out + first, down[0], src, nullptr, cnt, down[1]);
            __syncthreads();
            if (0 == threadIdx.x) {
                for (int j = 0; j < nkids; ++j) {
                    store_release_sys(
                        (uint64_t *) a.child_inbox[j] + CGPU_CUDA_FLAG_TREE_POSTED(c, 2), item + 1);
                }
                store_release_sys((uint64_t *) a.parent_inbox +
                                      CGPU_CUDA_FLAG_TREE_CONSUMED(c, 1 + me_as_child),
                                  item + 1);
            }
        }
    }
    return true;
}

/* even grids (CGPU_CUDA_GRID_DOC): a channel's reduce and broadcast run at once */
template <typename T, int OP> __global__ void tree_kernel(const cgpu_cuda_tree_args_t a)
{
    CGPU_EACH_PART((int) blockIdx.x, 2 * a.nch, (int) gridDim.x, (tree_part<T, OP>(a, part_)));
}

template <typename T, int OP> struct TreeK {
    static void go(const cgpu_cuda_tree_args_t *a, int blocks, int threads, cudaStream_t st)
    {
        static std::atomic<unsigned long long> fitc{0};
        const int fit = cached_fit(fitc, tree_kernel<T, OP>, threads);
        tree_kernel<T, OP><<<blocks, fit, 0, st>>>(*a);
    }
    static void load()
    {
        load_kernel(tree_kernel<T, OP>);
    }
};

} /* namespace */

int cgpu_cuda_tree_preload(void)
{
    return preload_family<TreeK>();
}

extern "C" int cgpu_cuda_tree_allreduce(const cgpu_cuda_tree_args_t *a, cgpu_dtype_t dt,
                                        cgpu_op_t op, int threads, void *stream)
{
    if (!cgpu_cuda_reduce_supported(dt, op)) {
        return (int) cudaErrorInvalidValue;
    }
    int rc =
        dispatch<TreeK>(a, dt, op, grid_of(a->grid, 2 * a->nch, 2), threads, (cudaStream_t) stream);
    return 0 != rc ? rc : (int) cudaGetLastError();
}
