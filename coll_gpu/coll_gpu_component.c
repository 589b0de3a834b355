/*
 * coll/gpu: the component: its descriptor, open (the parameters' checks, the engine's start)
 * and close. The parameters themselves, their table, help texts and checks, are in
 * coll_gpu_params.c.
 */
#define CGPU_LOG_SUBSYS CGPU_SUB_INIT
#include <stdio.h>
#include <stdlib.h>

#include "coll_gpu.h"
#include "coll_gpu_params.h"

#include "opal/runtime/opal_progress.h"
#include "opal/util/output.h"

static int gpu_open(void);
static int gpu_close(void);

// clang-format off
mca_coll_gpu_component_t mca_coll_gpu_component = {
    .super = {
        .collm_version = {
            MCA_COLL_BASE_VERSION_2_0_0,
            .mca_component_name = "gpu",
            MCA_BASE_MAKE_VERSION(component, 0, 1, 0),
            .mca_open_component = gpu_open,
            .mca_close_component = gpu_close,
            .mca_register_component_params = mca_coll_gpu_params_register,
        },
        .collm_data = {
            MCA_BASE_METADATA_PARAM_CHECKPOINT
        },
        .collm_init_query = mca_coll_gpu_init_query,
        .collm_comm_query = mca_coll_gpu_comm_query,
    },
    .priority = 40,
    .self_priority = 90,
    .nb_max_workers = 256,
    .nb_engine = -1,
    .stage_chunk_bytes = 4194304,
    .stage_pipeline_min_bytes = 524288,
    .stage_pinned_bytes = 134217728,
    .stage_direct_min_bytes = 131072,
    .gather_scratch_bytes = 268435456,
    .stage_allreduce_engine = true,
    .verbose = 0,
    .output = -1,
    .backend = CGPU_BACKEND_AUTO,
    .allreduce_algorithm = CGPU_ALLREDUCE_AUTO,
    .alltoall_algorithm = CGPU_ALLTOALL_AUTO,
};
// clang-format on

void mca_coll_gpu_log(int level, const char *msg)
{
    if (CGPU_LOG_WARN == level) {
        opal_output(0, "coll/gpu: %s", msg);
    } else {
        opal_output_verbose(level, mca_coll_gpu_component.output, "coll/gpu: %s", msg);
    }
}

/* The engine's long waits run Open MPI's progress, so that a peer blocked in a receive
 * from this rank (a rendezvous the sender must push) is not left waiting on us. */
static void engine_progress(void)
{
    (void) opal_progress();
}

static int gpu_open(void)
{
    mca_coll_gpu_component_t *c = &mca_coll_gpu_component;
    c->output = opal_output_open(NULL);
    opal_output_set_verbosity(c->output, c->verbose);
    /* every part logs through cgpu_log from here on; the subsystem mask is known once the
     * parameters are checked */
    cgpu_log_setup(mca_coll_gpu_log, c->verbose, CGPU_SUB_ALL);

    if (!mca_coll_gpu_params_check()) {
        c->engine_up = false; /* every communicator declines (comm_query) */
        return OMPI_SUCCESS;
    }

    cgpu_config_t cfg;
    cgpu_config_default(&cfg);
    cfg.backend = (cgpu_backend_t) c->backend;
    cfg.slot_bytes = c->slot_bytes;
    cfg.nslots = c->slots;
    cfg.stage_bytes = c->stage_bytes;
    cfg.shared_stage_bytes = c->shared_stage_bytes;
    cfg.max_comms = c->max_comms;
    cfg.cuda_channels = c->cuda_channels;
    cfg.cuda_threads = c->cuda_threads;
    cfg.cuda_slot_bytes = c->cuda_slot_bytes;
    cfg.cuda_slots = c->cuda_slots;
    cfg.cuda_oneshot_bytes = c->cuda_oneshot_bytes;
    cfg.cuda_small_bytes = c->cuda_small_bytes;
    cfg.cuda_oneshot_block_bytes = c->cuda_oneshot_block_bytes;
    cfg.cuda_oneshot_small_block_bytes = c->cuda_oneshot_small_block_bytes;
    cfg.cuda_ll_bytes = c->cuda_ll_bytes;
    cfg.cuda_timeout_s = c->cuda_timeout;
    cfg.cuda_tree_channels = c->cuda_tree_channels;
    cfg.cuda_a2a_channels = c->cuda_a2a_channels;
    cfg.cuda_inbox_pool = c->cuda_inbox_pool;
    cfg.shm_pool = c->shm_pool;
    cfg.cuda_ipc_cache_size = c->cuda_ipc_cache_size;
    cfg.cuda_tree_max_bytes = c->cuda_tree_max_bytes;
    cfg.cuda_channel_min_bytes = c->cuda_channel_min_bytes;
    cfg.cuda_chain_chunk_bytes = c->cuda_chain_chunk_bytes;
    cfg.cuda_stream_order = c->cuda_stream_order; /* the autos: resolved in init_query */
    cfg.cuda_wait_polls = c->cuda_wait_polls;
    cfg.cuda_ce_alltoall_min_bytes = c->cuda_ce_alltoall_min_bytes;
    cfg.cuda_ce_bcast_min_bytes = c->cuda_ce_bcast_min_bytes;
    cfg.cuda_ce_reduce_min_bytes = c->cuda_ce_reduce_min_bytes;
    cfg.cuda_ce_allreduce_min_bytes = c->cuda_ce_allreduce_min_bytes;
    cfg.cuda_resident = c->cuda_resident;
    cfg.cuda_resident_max_bytes = c->cuda_resident_max_bytes;
    cfg.cuda_resident_idle_us = c->cuda_resident_idle_us;
    cfg.cuda_resident_life_us = c->cuda_resident_life_us;
    cfg.cuda_resident_max_kernels = c->cuda_resident_max_kernels;
    cfg.cuda_resident_cluster = c->cuda_resident_cluster;
    cfg.cuda_resident_gate = c->cuda_resident_gate;
    cfg.cuda_setup_exclusive = c->cuda_setup_exclusive;
    cfg.cuda_setup_wait_ms = c->cuda_setup_wait_ms;
    cfg.cuda_time_sliced = c->cuda_time_sliced;
    cfg.cuda_block_budget = c->cuda_block_budget;
    cfg.cuda_block_spare = c->cuda_block_spare;
    cfg.profiler = c->profiler;
    cfg.ofi_provider = c->ofi_provider;
    cfg.stage_host_buffers = c->stage_host_buffers;
    cfg.stage_pinned_bytes = c->stage_pinned_bytes;
    cfg.stage_direct_min = c->stage_direct_min_bytes;
    cfg.proxy_max_peers = c->proxy_max_peers;
    cfg.proxy_max_inflight = c->proxy_max_inflight;
    cfg.proxy_bounce_bytes = c->proxy_bounce_bytes;
    if (c->fake_nodes > 0) {
        /* the launcher's world rank and size (the world communicator does not exist yet) */
        const char *r = getenv("OMPI_COMM_WORLD_RANK"), *n = getenv("OMPI_COMM_WORLD_SIZE");
        const long rank = NULL != r ? atol(r) : 0, size = NULL != n ? atol(n) : 1;
        cfg.fake_node = mca_coll_gpu_fake_node(rank, size);
    }
    cfg.ras_timeout_s = c->ras_timeout;
    cfg.ras_abort_on_timeout = c->ras_abort_on_timeout;
    cfg.check_calls = c->check_calls;
    cfg.verbose = c->verbose;
    cfg.log_subsystems = c->log_subsystems;
    cfg.log = mca_coll_gpu_log;
    cfg.progress = engine_progress;
    cgpu_status_t st = cgpu_engine_init(&cfg);
    c->engine_up = (CGPU_OK == st);
    if (!c->engine_up) {
        /* every value passed its own check above: what is left is a combination of them */
        opal_output(0, "coll/gpu: engine not started (%s); coll/gpu stays out of the way",
                    cgpu_status_string(st));
        return OMPI_SUCCESS;
    }
    mca_coll_gpu_nb_open();
    /* auto declines without a GPU by design (a plugin installed for every node); cuda was
     * asked for by name, so its absence is said, once per node (GPUs differ by node) */
    if (CGPU_BACKEND_CUDA == c->backend && !cgpu_engine_cuda_usable() &&
        mca_coll_gpu_node_speaker()) {
        opal_output(0, "coll/gpu: coll_gpu_backend = cuda, but this node has no usable GPU (no "
                       "device, no CUDA driver, or coll/gpu built without CUDA): its communicators "
                       "use the other coll components; coll_gpu_backend = host runs coll/gpu on "
                       "host memory");
    }
    return OMPI_SUCCESS;
}

static int gpu_close(void)
{
    mca_coll_gpu_component_t *c = &mca_coll_gpu_component;
    mca_coll_gpu_nb_close();
    if (c->engine_up) {
        cgpu_engine_fini();
        c->engine_up = false;
    }
    if (c->output >= 0) {
        opal_output_close(c->output);
        c->output = -1;
    }
    return OMPI_SUCCESS;
}
