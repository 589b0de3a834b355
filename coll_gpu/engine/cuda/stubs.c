/*
 * coll/gpu engine, cuda backend: the entries the rest of the engine calls, for builds
 * without CUDA (--with-cuda=no), in one place.
 *
 * Set-up answers CGPU_ERR_NOT_SUPPORTED and releases do nothing, so the engine calls the
 * backend the same way in both builds. What exists in both builds (the pool's counters) is
 * not here but beside its CUDA code (pool.c).
 */
#include <string.h>

#include "cgpu_config.h"
#include "cgpu_cuda_pool.h"

#ifndef CGPU_HAVE_CUDA

/* ---- the inbox pool and IPC cache (cgpu_cuda_pool.h) ---- */

cgpu_status_t cgpu_inbox_get(size_t bytes, size_t zero_bytes, int npeers, void *stream,
                             cgpu_inbox_t *out)
{
    (void) bytes, (void) zero_bytes, (void) npeers, (void) stream;
    memset(out, 0, sizeof(*out));
    return CGPU_ERR_NOT_SUPPORTED;
}

void cgpu_inbox_put(cgpu_inbox_t *ib)
{
    (void) ib;
}

cgpu_status_t cgpu_inbox_signal_release(char *const *peer_inbox, const size_t *release_off,
                                        int n, void *stream)
{
    (void) peer_inbox, (void) release_off, (void) n, (void) stream;
    return CGPU_ERR_NOT_SUPPORTED;
}

cgpu_status_t cgpu_ipc_cache_get(const void *handle, void **ptr)
{
    (void) handle;
    *ptr = NULL;
    return CGPU_ERR_NOT_SUPPORTED;
}

cgpu_status_t cgpu_ipc_cache_get_id(const void *handle, uint64_t id, void **ptr)
{
    (void) handle, (void) id;
    *ptr = NULL;
    return CGPU_ERR_NOT_SUPPORTED;
}

void cgpu_ipc_cache_put(void *ptr)
{
    (void) ptr;
}

void cgpu_cuda_pool_fini(void)
{
}

#endif /* !CGPU_HAVE_CUDA */
