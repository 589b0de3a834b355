/*
 * coll/gpu kernels: a ring channel's state and its slots (the right neighbour's inbox to
 * send into, this rank's own to receive from), shared by the ring allreduce
 * (cgpu_cuda_ring.cu) and the other collectives on the ring's links (cgpu_cuda_ringx.cu).
 */
#ifndef CGPU_CUDA_RING_CUH
#define CGPU_CUDA_RING_CUH

#include "cgpu_cuda_device.cuh"

namespace {

struct RingState {
    const cgpu_cuda_ring_args_t *a;
    int c;
    uint64_t sent;  /* items this channel has sent so far in this call */
    uint64_t recvd; /* items it has received so far (a call ends with sent == recvd) */
    uint64_t *my_flags, *right_flags, *left_flags;
};

template <typename T> __device__ T *send_slot(RingState &s)
{
    const cgpu_cuda_ring_args_t *a = s.a;
    uint64_t abs = a->sbase[s.c] + s.sent;
    /* room: the right neighbour has consumed item abs - nslots */
    if (abs >= (uint64_t) a->nslots &&
        !block_wait_ge(s.my_flags + CGPU_CUDA_FLAG_RING_CONSUMED(s.c), abs + 1 - a->nslots,
                       a->timeout_ns, a->err, CGPU_CUDA_ERR_RING_CONSUMED, s.c)) {
        return nullptr;
    }
    char *slots = a->right_inbox + a->ring_off + (size_t) s.c * a->nslots * a->slot_bytes;
    return (T *) (slots + (size_t) (abs % a->nslots) * a->slot_bytes);
}

template <typename T> __device__ const T *recv_slot(RingState &s)
{
    const cgpu_cuda_ring_args_t *a = s.a;
    uint64_t abs = a->rbase[s.c] + s.recvd;
    if (!block_wait_ge(s.my_flags + CGPU_CUDA_FLAG_RING_POSTED(s.c), abs + 1, a->timeout_ns, a->err,
                       CGPU_CUDA_ERR_RING_POSTED, s.c)) {
        return nullptr;
    }
    const char *slots = a->my_inbox + a->ring_off + (size_t) s.c * a->nslots * a->slot_bytes;
    return (const T *) (slots + (size_t) (abs % a->nslots) * a->slot_bytes);
}

/* Finish step: publish what we sent and/or free what we received. */
__device__ void step_done(RingState &s, bool sent, bool received)
{
    if (sent) {
        s.sent++;
        block_publish(s.right_flags + CGPU_CUDA_FLAG_RING_POSTED(s.c), s.a->sbase[s.c] + s.sent);
    } else {
        __syncthreads();
    }
    if (received) {
        s.recvd++;
        if (0 == threadIdx.x) {
            store_flag(s.left_flags + CGPU_CUDA_FLAG_RING_CONSUMED(s.c), s.a->rbase[s.c] + s.recvd);
        }
    }
}

__device__ void ring_state_init(RingState &s, const cgpu_cuda_ring_args_t *a, int c)
{
    s.a = a;
    s.c = c;
    s.sent = 0;
    s.recvd = 0;
    s.my_flags = (uint64_t *) a->my_inbox;
    s.right_flags = (uint64_t *) a->right_inbox;
    s.left_flags = (uint64_t *) a->left_inbox;
}

} /* namespace */

#endif /* CGPU_CUDA_RING_CUH */
