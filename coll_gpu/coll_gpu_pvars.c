/*
 * coll/gpu: MPI_T performance variables.
 *
 * A read loads one atomic of the module and nothing else: no lock, no progress, no
 * MPI or CUDA call (decision 5), so a tool may poll at any rate from any thread.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "coll_gpu.h"
#include "coll_gpu_params.h"
#include "cgpu_proxy.h"
#include "cgpu_shm.h"
#include "cgpu_cuda_pool.h"

#include "opal/mca/base/mca_base_pvar.h"

static int read_engine_calls(const struct mca_base_pvar_t *pvar, void *value, void *obj)
{
    (void) pvar;
    mca_coll_gpu_module_t *m = mca_coll_gpu_module_of((struct ompi_communicator_t *) obj);
    *(unsigned long long *) value =
        NULL == m ? 0 : atomic_load_explicit(&m->engine_calls, memory_order_relaxed);
    return OPAL_SUCCESS;
}

static int read_fallback_calls(const struct mca_base_pvar_t *pvar, void *value, void *obj)
{
    (void) pvar;
    mca_coll_gpu_module_t *m = mca_coll_gpu_module_of((struct ompi_communicator_t *) obj);
    *(unsigned long long *) value =
        NULL == m ? 0 : atomic_load_explicit(&m->fallback_calls, memory_order_relaxed);
    return OPAL_SUCCESS;
}

static int read_live_comms(const struct mca_base_pvar_t *pvar, void *value, void *obj)
{
    (void) pvar;
    (void) obj;
    *(unsigned long long *) value = (unsigned long long) cgpu_engine_live_comms();
    return OPAL_SUCCESS;
}

/* One value per bound communicator. */
static int notify_comm(struct mca_base_pvar_t *pvar, mca_base_pvar_event_t event, void *obj,
                       int *count)
{
    (void) pvar;
    (void) obj;
    if (MCA_BASE_PVAR_HANDLE_BIND == event) {
        *count = 1;
    }
    return OPAL_SUCCESS;
}

/* ---- RAS: health of each communicator (engine atomics) ---- */

static int read_ras(const struct mca_base_pvar_t *pvar, void *value, void *obj)
{
    const cgpu_ras_item_t item = (cgpu_ras_item_t) (intptr_t) pvar->ctx;
    mca_coll_gpu_module_t *m = mca_coll_gpu_module_of((struct ompi_communicator_t *) obj);
    cgpu_comm_t *ec = NULL == m ? NULL : __atomic_load_n(&m->ecomm, __ATOMIC_ACQUIRE);
    uint64_t v = 0;
    if (NULL != ec) {
        v = cgpu_comm_ras(ec, item);
    } else if (CGPU_RAS_STATE == item && NULL != m) {
        v = CGPU_MODULE_FALLBACK == __atomic_load_n(&m->state, __ATOMIC_ACQUIRE)
                ? CGPU_RAS_DEGRADED
                : CGPU_RAS_INITIALIZING;
    }
    if (CGPU_RAS_STATE == item || CGPU_RAS_ALGORITHM == item || CGPU_RAS_TRANSPORT == item) {
        *(int *) value = (int) v;
    } else {
        *(unsigned long long *) value = (unsigned long long) v;
    }
    return OPAL_SUCCESS;
}

static int read_process(const struct mca_base_pvar_t *pvar, void *value, void *obj)
{
    (void) obj;
    unsigned long long v = 0;
    switch ((intptr_t) pvar->ctx) {
    case 0:
        v = cgpu_engine_watchdog_firings();
        break;
    case 1:
        v = (unsigned long long) cgpu_engine_shm_segments();
        break;
    case 2:
        v = cgpu_ipc_cache_hits();
        break;
    case 3:
        v = cgpu_ipc_cache_misses();
        break;
    case 4:
        v = cgpu_ipc_cache_evictions();
        break;
    case 5:
        v = cgpu_inbox_reuses();
        break;
    case 6:
        v = (unsigned long long) cgpu_shm_open_fds();
        break;
    case 7:
        v = cgpu_proxy_queue_depth();
        break;
    case 8:
        v = cgpu_proxy_ops_completed();
        break;
    case 9:
        v = (unsigned long long) cgpu_proxy_peers();
        break;
    case 10:
        v = cgpu_engine_shm_reuses();
        break;
    case 11:
        v = (unsigned long long) cgpu_engine_shm_kept();
        break;
    default:
        v = 0;
        break;
    }
    *(unsigned long long *) value = v;
    return OPAL_SUCCESS;
}

/* Open MPI 4.1's readable pvar dump (ompi_info) has room for two lines plus the
 * terminator but writes a third, "Values: ...", for a pvar with an enumerator, and
 * ompi_info then reads past the array and crashes. Our enumerators decline to be
 * dumped (each description lists their values instead, built from the same table); MPI_T
 * tools still get them through MPI_T_enum_get_item. */
static int enum_no_dump(mca_base_var_enum_t *self, char **out)
{
    (void) self;
    *out = NULL;
    return OPAL_ERR_NOT_SUPPORTED;
}

typedef struct ras_pvar {
    const char *name;
    cgpu_ras_item_t item;
    int var_class;
    const mca_coll_gpu_value_t *values; /* STATE class only: listed after desc */
    size_t nvalues;
    const char *desc;
} ras_pvar_t;

#define VALUES(table) table, MCA_COLL_GPU_NVALUES(table)

static const ras_pvar_t ras_pvars[] = {
    {"state", CGPU_RAS_STATE, MCA_BASE_PVAR_CLASS_STATE, VALUES(mca_coll_gpu_state_values),
     "Health of this communicator's engine."},
    {"allreduce_started", CGPU_RAS_ALLREDUCE_STARTED, MCA_BASE_PVAR_CLASS_COUNTER, NULL, 0,
     "MPI_Allreduce calls the engine started on this communicator"},
    {"allreduce_completed", CGPU_RAS_ALLREDUCE_COMPLETED, MCA_BASE_PVAR_CLASS_COUNTER, NULL, 0,
     "MPI_Allreduce calls the engine completed successfully on this communicator"},
    {"alltoall_started", CGPU_RAS_ALLTOALL_STARTED, MCA_BASE_PVAR_CLASS_COUNTER, NULL, 0,
     "MPI_Alltoall calls the engine started on this communicator"},
    {"alltoall_completed", CGPU_RAS_ALLTOALL_COMPLETED, MCA_BASE_PVAR_CLASS_COUNTER, NULL, 0,
     "MPI_Alltoall calls the engine completed successfully on this communicator"},
    {"bcast_started", CGPU_RAS_BCAST_STARTED, MCA_BASE_PVAR_CLASS_COUNTER, NULL, 0,
     "MPI_Bcast calls the engine started on this communicator"},
    {"bcast_completed", CGPU_RAS_BCAST_COMPLETED, MCA_BASE_PVAR_CLASS_COUNTER, NULL, 0,
     "MPI_Bcast calls the engine completed successfully on this communicator"},
    {"allgather_started", CGPU_RAS_ALLGATHER_STARTED, MCA_BASE_PVAR_CLASS_COUNTER, NULL, 0,
     "MPI_Allgather calls the engine started on this communicator"},
    {"allgather_completed", CGPU_RAS_ALLGATHER_COMPLETED, MCA_BASE_PVAR_CLASS_COUNTER, NULL, 0,
     "MPI_Allgather calls the engine completed successfully on this communicator"},
    {"reduce_scatter_started", CGPU_RAS_REDUCE_SCATTER_STARTED, MCA_BASE_PVAR_CLASS_COUNTER, NULL,
     0, "MPI_Reduce_scatter_block calls the engine started on this communicator"},
    {"reduce_scatter_completed", CGPU_RAS_REDUCE_SCATTER_COMPLETED, MCA_BASE_PVAR_CLASS_COUNTER,
     NULL, 0,
     "MPI_Reduce_scatter_block calls the engine completed successfully on this communicator"},
    {"reduce_started", CGPU_RAS_REDUCE_STARTED, MCA_BASE_PVAR_CLASS_COUNTER, NULL, 0,
     "MPI_Reduce calls the engine started on this communicator"},
    {"reduce_completed", CGPU_RAS_REDUCE_COMPLETED, MCA_BASE_PVAR_CLASS_COUNTER, NULL, 0,
     "MPI_Reduce calls the engine completed successfully on this communicator"},
    {"bytes", CGPU_RAS_BYTES, MCA_BASE_PVAR_CLASS_COUNTER, NULL, 0,
     "Bytes this rank contributed to the engine's completed collectives on this communicator"},
    {"last_seq", CGPU_RAS_LAST_SEQ, MCA_BASE_PVAR_CLASS_LEVEL, NULL, 0,
     "Sequence number of the last engine collective completed on this communicator"},
    {"idle_us", CGPU_RAS_IDLE_US, MCA_BASE_PVAR_CLASS_LEVEL, NULL, 0,
     "Microseconds since the running engine collective last made progress (0 when none runs)"},
    {"peers_missing", CGPU_RAS_PEERS_MISSING, MCA_BASE_PVAR_CLASS_LEVEL, NULL, 0,
     "Peers that have not yet entered the engine collective this rank is running"},
    {"peers_missing_mask", CGPU_RAS_PEERS_MISSING_MASK, MCA_BASE_PVAR_CLASS_LEVEL, NULL, 0,
     "Which peers have not yet entered it: bit r set for rank r (ranks 0 to 63)"},
    {"errors_timeout", CGPU_RAS_ERR_TIMEOUT, MCA_BASE_PVAR_CLASS_COUNTER, NULL, 0,
     "Engine collectives on this communicator that failed by timeout"},
    {"errors_device", CGPU_RAS_ERR_DEVICE, MCA_BASE_PVAR_CLASS_COUNTER, NULL, 0,
     "Engine collectives on this communicator that failed with a CUDA error"},
    {"errors_other", CGPU_RAS_ERR_OTHER, MCA_BASE_PVAR_CLASS_COUNTER, NULL, 0,
     "Engine collectives on this communicator that failed otherwise (memory, misuse)"},
    {"algorithm", CGPU_RAS_ALGORITHM, MCA_BASE_PVAR_CLASS_STATE, VALUES(mca_coll_gpu_alg_values),
     "Algorithm of the running (or last) engine collective on this communicator."},
    {"transport", CGPU_RAS_TRANSPORT, MCA_BASE_PVAR_CLASS_STATE,
     VALUES(mca_coll_gpu_transport_values),
     "Transport this communicator's engine uses between ranks."},
};

static int register_ras_pvars(const mca_base_component_t *comp)
{
    for (size_t i = 0; i < sizeof(ras_pvars) / sizeof(ras_pvars[0]); ++i) {
        const ras_pvar_t *p = &ras_pvars[i];
        mca_base_var_enum_t *en = NULL;
        char *desc = NULL;
        if (NULL != p->values) {
            char ename[64];
            snprintf(ename, sizeof(ename), "coll_gpu_%s", p->name);
            if (OPAL_SUCCESS == mca_coll_gpu_values_enum(ename, p->values, p->nvalues, &en)) {
                en->dump = enum_no_dump;
            }
            desc = mca_coll_gpu_values_text(p->desc, p->values, p->nvalues, true, NULL);
        }
        int rc = mca_base_component_pvar_register(
            comp, p->name, NULL != desc ? desc : p->desc, OPAL_INFO_LVL_4, p->var_class,
            NULL != p->values ? MCA_BASE_VAR_TYPE_INT : MCA_BASE_VAR_TYPE_UNSIGNED_LONG_LONG, en,
            MCA_BASE_VAR_BIND_MPI_COMM, MCA_BASE_PVAR_FLAG_READONLY | MCA_BASE_PVAR_FLAG_CONTINUOUS,
            read_ras, NULL, notify_comm, (void *) (intptr_t) p->item);
        free(desc); /* the pvar keeps its own copy */
        if (NULL != en) {
            OBJ_RELEASE(en); /* the pvar holds its own reference */
        }
        if (rc < 0) {
            return rc;
        }
    }
    /* process-wide: read_process serves entry k (its ctx) */
    static const struct {
        const char *name;
        int var_class;
        const char *desc;
    } procs[] = {
        {"watchdog_firings", MCA_BASE_PVAR_CLASS_COUNTER,
         "Collectives the RAS watchdog reported as stuck (no progress for coll_gpu_ras_timeout)"},
        {"shm_segments", MCA_BASE_PVAR_CLASS_LEVEL,
         "Shared-memory segments this process has mapped (its own and peers')"},
        {"ipc_cache_hits", MCA_BASE_PVAR_CLASS_COUNTER,
         "cuda backend: peer inboxes a new communicator found already mapped in this process "
         "(no new CUDA IPC mapping)"},
        {"ipc_cache_misses", MCA_BASE_PVAR_CLASS_COUNTER,
         "cuda backend: peer inboxes this process had to map (CUDA IPC open)"},
        {"ipc_cache_evictions", MCA_BASE_PVAR_CLASS_COUNTER,
         "cuda backend: unused peer mappings closed because more than "
         "coll_gpu_cuda_ipc_cache_size were cached"},
        {"inbox_reuses", MCA_BASE_PVAR_CLASS_COUNTER,
         "cuda backend: communicators that took a released communicator's inbox from the pool "
         "instead of allocating and exporting a new one"},
        {"open_fds", MCA_BASE_PVAR_CLASS_LEVEL,
         "File descriptors coll/gpu holds open right now: a shared segment's is closed as soon "
         "as the segment is mapped, so this is 0 outside set-up"},
        {"proxy_queue_depth", MCA_BASE_PVAR_CLASS_LEVEL,
         "Inter-node proxy: operations submitted and not yet completed in this process (0 "
         "while no communicator spans nodes)"},
        {"proxy_ops", MCA_BASE_PVAR_CLASS_COUNTER,
         "Inter-node proxy: sends and receives completed by this process's proxy"},
        {"proxy_peers", MCA_BASE_PVAR_CLASS_LEVEL,
         "Inter-node proxy: peers this process has connected to (at most "
         "coll_gpu_proxy_max_peers; only peers an algorithm used)"},
        {"shm_reuses", MCA_BASE_PVAR_CLASS_COUNTER,
         "Communicators that took a released communicator's shared segment from the pool "
         "(coll_gpu_shm_pool) instead of making and mapping a new one"},
        {"shm_kept", MCA_BASE_PVAR_CLASS_LEVEL,
         "Shared segments mapped for the pool alone (coll_gpu_shm_pool): released "
         "communicators' own segments kept for the next ones and idle copies of peers'; "
         "shm_segments minus this is what live communicators map"},
    };
    int rc = 0;
    for (size_t k = 0; rc >= 0 && k < sizeof(procs) / sizeof(procs[0]); ++k) {
        rc = mca_base_component_pvar_register(
            comp, procs[k].name, procs[k].desc, OPAL_INFO_LVL_4, procs[k].var_class,
            MCA_BASE_VAR_TYPE_UNSIGNED_LONG_LONG, NULL, MCA_BASE_VAR_BIND_NO_OBJECT,
            MCA_BASE_PVAR_FLAG_READONLY | MCA_BASE_PVAR_FLAG_CONTINUOUS, read_process, NULL, NULL,
            (void *) (intptr_t) k);
    }
    return rc < 0 ? rc : OMPI_SUCCESS;
}

int mca_coll_gpu_pvars_register(void)
{
    const mca_base_component_t *comp = &mca_coll_gpu_component.super.collm_version;
    int rc;

    rc = mca_base_component_pvar_register(
        comp, "engine_calls",
        "Collective calls on this communicator that coll/gpu ran itself: every blocking or "
        "non-blocking collective the engine ran, whatever the operation, and on a one-rank "
        "communicator every call with a device buffer (copied by coll/gpu)",
        OPAL_INFO_LVL_4, MCA_BASE_PVAR_CLASS_COUNTER, MCA_BASE_VAR_TYPE_UNSIGNED_LONG_LONG, NULL,
        MCA_BASE_VAR_BIND_MPI_COMM, MCA_BASE_PVAR_FLAG_READONLY | MCA_BASE_PVAR_FLAG_CONTINUOUS,
        read_engine_calls, NULL, notify_comm, NULL);
    if (rc < 0) {
        return rc;
    }
    rc = mca_base_component_pvar_register(
        comp, "fallback_calls",
        "Collective calls on this communicator that coll/gpu handed to the previous coll "
        "module (unsupported datatype/op, forced by an MCA param, or engine set-up failed)",
        OPAL_INFO_LVL_4, MCA_BASE_PVAR_CLASS_COUNTER, MCA_BASE_VAR_TYPE_UNSIGNED_LONG_LONG, NULL,
        MCA_BASE_VAR_BIND_MPI_COMM, MCA_BASE_PVAR_FLAG_READONLY | MCA_BASE_PVAR_FLAG_CONTINUOUS,
        read_fallback_calls, NULL, notify_comm, NULL);
    if (rc < 0) {
        return rc;
    }
    rc = mca_base_component_pvar_register(
        comp, "live_comms", "Internal (engine) communicators alive in this process",
        OPAL_INFO_LVL_4, MCA_BASE_PVAR_CLASS_LEVEL, MCA_BASE_VAR_TYPE_UNSIGNED_LONG_LONG, NULL,
        MCA_BASE_VAR_BIND_NO_OBJECT, MCA_BASE_PVAR_FLAG_READONLY | MCA_BASE_PVAR_FLAG_CONTINUOUS,
        read_live_comms, NULL, NULL, NULL);
    return rc < 0 ? rc : register_ras_pvars(comp);
}
