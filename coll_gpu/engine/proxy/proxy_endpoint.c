/*
 * coll/gpu engine, inter-node proxy: the provider's set-up and teardown (progress thread).
 *
 * The thread opens everything it will use before it answers the starting thread: the CUDA
 * device of the process, its own placement (proxy_topo.c), the window (coll_gpu_proxy_max_
 * inflight, split between sends and receives), the libfabric endpoint with its completion
 * queue and address vector (btl_glue/cgpu_ofi.c), whether device memory goes to the
 * provider directly (FI_HMEM, probed) or is staged, the chunk size and the copy streams.
 * The teardown closes all of it, also after a set-up that failed half-way.
 */
#include "cgpu_config.h"

#include <stdio.h>
#include <stdlib.h>

#include "cgpu_cuda.h"
#include "proxy_internal.h"

enum {
    PROXY_CHUNK_MIN = 4096, /* smallest chunk (bounce buffer) */
};

/* How long a cancel may take before it is abandoned: 2 s, or a quarter of
 * coll_gpu_ras_timeout when that is shorter (at least 0.25 s), so a failing wait ends within
 * the timeout plus the watchdog's own granularity (set by cgpu_proxy_setup). */
uint64_t cgpu_proxy_cancel_grace_ns = 2000000000ull;

cgpu_status_t cgpu_proxy_setup(void)
{
    const cgpu_config_t *cfg = cgpu_engine_config();
    cgpu_ofi_opts_t opts = {0};
    cgpu_status_t st;
    int inflight = cfg->proxy_max_inflight < 2 ? 2 : cfg->proxy_max_inflight;

    if (cgpu_proxy.device >= 0 && CGPU_OK != cgpu_cuda_set_device(cgpu_proxy.device)) {
        cgpu_proxy.device = -1;
    }
    cgpu_proxy_topology();
    cgpu_proxy.cap[PROXY_KIND_SEND] = inflight / 2;
    cgpu_proxy.cap[PROXY_KIND_RECV] = inflight - inflight / 2;
    cgpu_proxy.nops = 0;
    cgpu_proxy.ops_cap = inflight;
    cgpu_proxy.ops = calloc((size_t) cgpu_proxy.ops_cap,
                            sizeof(*cgpu_proxy.ops)); /* the operations: made as needed */
    if (NULL == cgpu_proxy.ops) {
        return CGPU_ERR_NO_MEMORY;
    }
    opts.provider = cfg->ofi_provider;
    opts.want_hmem = cgpu_proxy.device >= 0;
    opts.no_directed = 0 != (cgpu_proxy.flags & CGPU_PROXY_TEST_NO_DIRECTED);
    opts.cq_size = (size_t) inflight * 2 + 1024; /* and one operation per group past it */
    opts.av_size = cfg->proxy_max_peers > 0 ? (size_t) cfg->proxy_max_peers : 64;
    st = cgpu_ofi_open(&opts, &cgpu_proxy.ofi);
    if (CGPU_OK != st) {
        return st;
    }
    snprintf(cgpu_proxy.provider, sizeof(cgpu_proxy.provider), "%s",
             cgpu_ofi_provider(cgpu_proxy.ofi));
    cgpu_proxy.hmem = cgpu_ofi_hmem(cgpu_proxy.ofi) && cgpu_proxy.device >= 0;
    if (cgpu_proxy.hmem) {
        /* A provider may report FI_HMEM and still refuse CUDA registrations (shm built
         * without CUDA support: ENOSYS): probe once; if so, device memory is staged, and
         * the endpoint is opened again without FI_HMEM, which slows host-memory transfers
         * too (shm: 0.80-0.86 of raw libfabric's bandwidth at 1-64 MiB with it) */
        void *probe = NULL;
        cgpu_status_t ps = cgpu_cuda_malloc(&probe, 4096, NULL);
        if (CGPU_OK == ps) {
            ps = cgpu_ofi_probe_cuda(cgpu_proxy.ofi, probe, 4096, cgpu_proxy.device);
            cgpu_cuda_free(probe);
        }
        if (CGPU_OK != ps) {
            cgpu_proxy.hmem = false;
            cgpu_log(CGPU_LOG_INFO,
                     "proxy: provider %s reports FI_HMEM but cannot register CUDA memory (%s); "
                     "device memory is staged through bounce buffers, the endpoint opened "
                     "without FI_HMEM",
                     cgpu_proxy.provider, cgpu_status_string(ps));
            cgpu_ofi_close(&cgpu_proxy.ofi);
            opts.want_hmem = false;
            st = cgpu_ofi_open(&opts, &cgpu_proxy.ofi);
            if (CGPU_OK != st) {
                return st;
            }
            snprintf(cgpu_proxy.provider, sizeof(cgpu_proxy.provider), "%s",
                     cgpu_ofi_provider(cgpu_proxy.ofi));
        }
    }
    st = cgpu_ofi_getname(cgpu_proxy.ofi, cgpu_proxy.name);
    if (CGPU_OK != st) {
        return st;
    }
    if (cfg->ras_timeout_s > 0) {
        const double q = cfg->ras_timeout_s / 4 < 0.25 ? 0.25 : cfg->ras_timeout_s / 4;
        cgpu_proxy_cancel_grace_ns = q < 2.0 ? (uint64_t) (q * 1e9) : 2000000000ull;
    }
    cgpu_proxy.directed = cgpu_ofi_directed(cgpu_proxy.ofi);
    cgpu_proxy.chunk =
        cfg->proxy_bounce_bytes < PROXY_CHUNK_MIN ? PROXY_CHUNK_MIN : cfg->proxy_bounce_bytes;
    if (cgpu_proxy.chunk > cgpu_ofi_max_msg(cgpu_proxy.ofi)) {
        cgpu_proxy.chunk = cgpu_ofi_max_msg(cgpu_proxy.ofi);
    }
    if (cgpu_proxy.device >= 0) {
        for (int k = 0; k < 2; ++k) {
            if (CGPU_OK != cgpu_cuda_stream_create(&cgpu_proxy.stream[k], false)) {
                return CGPU_ERR_DEVICE;
            }
        }
    }
    cgpu_log(CGPU_LOG_INFO,
             "proxy: started on provider %s: %d send(s) and %d receive(s) in flight at most, "
             "chunks of %zu bytes, device memory %s, peers at most %d",
             cgpu_proxy.provider, cgpu_proxy.cap[0], cgpu_proxy.cap[1], cgpu_proxy.chunk,
             cgpu_proxy.hmem ? "direct (FI_HMEM)" : "staged through bounce buffers",
             cfg->proxy_max_peers);
    return CGPU_OK;
}

void cgpu_proxy_teardown(void)
{
    for (int k = 0; k < 2; ++k) {
        if (NULL != cgpu_proxy.stream[k]) {
            (void) cgpu_cuda_stream_sync(cgpu_proxy.stream[k]);
        }
    }
    cgpu_ofi_close(&cgpu_proxy.ofi);
    for (int k = 0; k < 2; ++k) {
        cgpu_proxy_pairs_free(k);
        if (NULL != cgpu_proxy.stream[k]) {
            cgpu_cuda_stream_destroy(cgpu_proxy.stream[k]);
            cgpu_proxy.stream[k] = NULL;
        }
    }
    for (int i = 0; i < cgpu_proxy.nops; ++i) {
        free(cgpu_proxy.ops[i]);
    }
    free(cgpu_proxy.ops);
    cgpu_proxy.ops = NULL;
    cgpu_proxy.nops = cgpu_proxy.ops_cap = 0;
    cgpu_proxy_topology_free();
}
