/*
 * coll/gpu engine, inter-node proxy: the build without libfabric.
 *
 * Configure found no libfabric, so the proxy is not built and these stand in for every
 * public function of cgpu_proxy.h: cgpu_proxy_built() says so, cgpu_proxy_acquire logs it
 * once and returns CGPU_ERR_NOT_SUPPORTED (a communicator across nodes then uses the
 * fallback), and the counters stay 0. The other files of this folder are built only with
 * libfabric (Makefile.am), so they need no #ifdef.
 */
#include "cgpu_config.h"

#include <stdatomic.h>

#include "cgpu_engine.h"
#include "cgpu_proxy.h"

bool cgpu_proxy_built(void)
{
    return false;
}

cgpu_status_t cgpu_proxy_acquire(void)
{
    static atomic_int told;
    if (0 == atomic_exchange(&told, 1)) {
        cgpu_log(CGPU_LOG_INFO, "proxy: not built (configure did not find libfabric)");
    }
    return CGPU_ERR_NOT_SUPPORTED;
}

void cgpu_proxy_release(void)
{
}

cgpu_status_t cgpu_proxy_addr(void *addr)
{
    (void) addr;
    return CGPU_ERR_NOT_SUPPORTED;
}

const char *cgpu_proxy_provider(void)
{
    return "none";
}

bool cgpu_proxy_hmem(void)
{
    return false;
}

uint32_t cgpu_proxy_max_context_id(void)
{
    return 0;
}

uint32_t cgpu_proxy_max_tag(void)
{
    return 0;
}

size_t cgpu_proxy_chunk_bytes(void)
{
    return 0;
}

cgpu_status_t cgpu_proxy_group_create(int rank, int size, const void *addrs, uint32_t context_id,
                                      cgpu_prof_comm_t *prof, cgpu_proxy_group_t **out)
{
    (void) rank, (void) size, (void) addrs, (void) context_id, (void) prof;
    *out = NULL;
    return CGPU_ERR_NOT_SUPPORTED;
}

void cgpu_proxy_group_destroy(cgpu_proxy_group_t **g)
{
    if (NULL != g) {
        *g = NULL;
    }
}

cgpu_status_t cgpu_proxy_isend(cgpu_proxy_group_t *g, int peer, const void *buf, size_t bytes,
                               uint32_t tag, cgpu_proxy_req_t *req)
{
    (void) g, (void) peer, (void) buf, (void) bytes, (void) tag, (void) req;
    return CGPU_ERR_NOT_SUPPORTED;
}

cgpu_status_t cgpu_proxy_irecv(cgpu_proxy_group_t *g, int peer, void *buf, size_t bytes,
                               uint32_t tag, cgpu_proxy_req_t *req)
{
    (void) g, (void) peer, (void) buf, (void) bytes, (void) tag, (void) req;
    return CGPU_ERR_NOT_SUPPORTED;
}

cgpu_status_t cgpu_proxy_test(cgpu_proxy_req_t *req)
{
    return (cgpu_status_t) atomic_load(&req->state);
}

cgpu_status_t cgpu_proxy_waitall(cgpu_proxy_req_t *reqs, int n, double timeout_s,
                                 const _Atomic int *abort)
{
    (void) reqs, (void) n, (void) timeout_s, (void) abort;
    return CGPU_ERR_NOT_SUPPORTED;
}

cgpu_status_t cgpu_proxy_waitall_quiet(cgpu_proxy_req_t *reqs, int n, double timeout_s)
{
    (void) reqs, (void) n, (void) timeout_s;
    return CGPU_ERR_NOT_SUPPORTED;
}

uint64_t cgpu_proxy_queue_depth(void)
{
    return 0;
}

uint64_t cgpu_proxy_ops_completed(void)
{
    return 0;
}

int cgpu_proxy_peers(void)
{
    return 0;
}

void cgpu_proxy_set_test_flags(unsigned flags)
{
    (void) flags;
}
