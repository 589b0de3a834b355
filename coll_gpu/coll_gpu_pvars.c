/*
 * coll/gpu: MPI_T performance variables.
 *
 * A read loads one atomic of the module and nothing else: no lock, no progress, no
 * MPI or CUDA call (decision 5), so a tool may poll at any rate from any thread.
 */
#include "coll_gpu.h"

#include "opal/mca/base/mca_base_pvar.h"

/* Our module on this communicator, found through the slots we serve (a pointer compare
 * on the enable function identifies our modules). NULL when we do not serve it. */
static mca_coll_gpu_module_t *module_of(struct ompi_communicator_t *comm)
{
    if (NULL == comm || NULL == comm->c_coll) {
        return NULL;
    }
    mca_coll_base_module_t *cand[2] = {comm->c_coll->coll_allreduce_module,
                                       comm->c_coll->coll_alltoall_module};
    for (int i = 0; i < 2; ++i) {
        if (NULL != cand[i] && cand[i]->coll_allreduce == mca_coll_gpu_allreduce) {
            return (mca_coll_gpu_module_t *) cand[i];
        }
    }
    return NULL;
}

static int read_engine_calls(const struct mca_base_pvar_t *pvar, void *value, void *obj)
{
    (void) pvar;
    mca_coll_gpu_module_t *m = module_of((struct ompi_communicator_t *) obj);
    *(unsigned long long *) value =
        NULL == m ? 0 : atomic_load_explicit(&m->engine_calls, memory_order_relaxed);
    return OPAL_SUCCESS;
}

static int read_fallback_calls(const struct mca_base_pvar_t *pvar, void *value, void *obj)
{
    (void) pvar;
    mca_coll_gpu_module_t *m = module_of((struct ompi_communicator_t *) obj);
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

int mca_coll_gpu_pvars_register(void)
{
    const mca_base_component_t *comp = &mca_coll_gpu_component.super.collm_version;
    int rc;

    rc = mca_base_component_pvar_register(
        comp, "engine_calls",
        "Collective calls on this communicator (allreduce, alltoall) that the coll/gpu engine "
        "served",
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
    return rc < 0 ? rc : OMPI_SUCCESS;
}
