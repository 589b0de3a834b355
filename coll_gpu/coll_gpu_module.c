/*
 * coll/gpu: the per-communicator module: query, enable, disable, destroy, and the function
 * slots it fills with the entry points of coll_gpu_entry.h.
 *
 * Ownership: the communicator owns the module (Open MPI refcounts it once per function
 * slot it serves; an engine-path call holds one more reference while it runs). The module
 * owns its retained references to the previous modules and its engine communicator, and
 * releases them in its destructor, which runs exactly once, when the last reference goes.
 * Open MPI calls coll_module_disable once per slot: it releases nothing (decision 4).
 */
#define CGPU_LOG_SUBSYS CGPU_SUB_INIT
#include "coll_gpu.h"
#include "coll_gpu_entry.h"
#include "coll_gpu_params.h"

#include "opal/util/output.h"

#include <stddef.h>
#include <string.h>

static void gpu_module_construct(mca_coll_gpu_module_t *m)
{
    m->comm = NULL;
    memset(&m->prev, 0, sizeof(m->prev));
    m->prev_saved = false;
    m->misuse_reported = false;
    m->ecomm = NULL;
    m->state = CGPU_MODULE_UNINIT;
    m->nbq = NULL;
    atomic_init(&m->nb_posted, 0);
    m->spans_nodes = -1;
    atomic_init(&m->nb_done, 0);
    atomic_init(&m->nb_released, 0);
    atomic_init(&m->engine_calls, 0);
    atomic_init(&m->fallback_calls, 0);
    atomic_init(&m->dead_code, 0);
    atomic_init(&m->dead_gen_seen, 0);
    m->mismatch_code = 0;
    m->mismatch_msg[0] = '\0';
    m->mismatch_told = false;
}

/* The slots we may serve besides allreduce, alltoall and allgather (which enable requires
 * of the previous modules): each is emptied where no previous module provides it. */
// clang-format off
#define CGPU_OPTIONAL_SLOTS(X)                                                             \
    X(ibarrier) X(allgatherv) X(alltoallv) X(alltoallw) X(bcast) X(exscan) X(gather)     \
    X(gatherv)                                                                            \
    X(reduce) X(reduce_scatter) X(reduce_scatter_block) X(scan) X(scatter) X(scatterv)    \
    X(iallreduce) X(ialltoall) X(iallgather) X(iallgatherv) X(ialltoallv) X(ialltoallw)   \
    X(ibcast) X(iexscan) X(igather) X(igatherv) X(ireduce) X(ireduce_scatter)             \
    X(ireduce_scatter_block) X(iscan) X(iscatter) X(iscatterv)                            \
    X(neighbor_allgather) X(neighbor_allgatherv) X(neighbor_alltoall)                     \
    X(neighbor_alltoallv) X(neighbor_alltoallw) X(ineighbor_allgather)                    \
    X(ineighbor_allgatherv) X(ineighbor_alltoall) X(ineighbor_alltoallv)                  \
    X(ineighbor_alltoallw)

/* The slots whose previous modules we call: the ones we serve, plus barrier (the
 * bootstrap). */
#define PREV_SLOT(name) offsetof(mca_coll_base_comm_coll_t, coll_##name##_module),
static const size_t prev_slots[] = {
    PREV_SLOT(allreduce) PREV_SLOT(alltoall) PREV_SLOT(allgather) PREV_SLOT(barrier)
    CGPU_OPTIONAL_SLOTS(PREV_SLOT)
};
// clang-format on
#undef PREV_SLOT
#define PREV_NSLOTS (sizeof(prev_slots) / sizeof(prev_slots[0]))

static mca_coll_base_module_t **prev_slot(mca_coll_gpu_module_t *m, size_t i)
{
    return (mca_coll_base_module_t **) ((char *) &m->prev + prev_slots[i]);
}

/* Drop the references taken in enable. Guarded: disable runs once per slot. */
static void gpu_module_release_prev(mca_coll_gpu_module_t *m)
{
    if (!m->prev_saved) {
        return;
    }
    m->prev_saved = false;
    for (size_t i = 0; i < PREV_NSLOTS; ++i) {
        mca_coll_base_module_t **slot = prev_slot(m, i);
        if (NULL != *slot) {
            OBJ_RELEASE(*slot);
            *slot = NULL;
        }
    }
}

static void gpu_module_destruct(mca_coll_gpu_module_t *m)
{
    mca_coll_gpu_nb_module_fini(m); /* its worker first: it may still hold the engine comm */
    if (NULL != m->ecomm) {
        cgpu_status_t st = cgpu_comm_release(&m->ecomm);
        if (CGPU_OK != st) {
            cgpu_log(CGPU_LOG_WARN,
                     "communicator %s freed while a collective was running on "
                     "it (%s); its engine resources are left to the engine's finalize",
                     NULL != m->comm ? m->comm->c_name : "?", cgpu_status_string(st));
        }
    }
    gpu_module_release_prev(m);
}

OBJ_CLASS_INSTANCE(mca_coll_gpu_module_t, mca_coll_base_module_t, gpu_module_construct,
                   gpu_module_destruct);

int mca_coll_gpu_init_query(bool enable_progress_threads, bool enable_mpi_threads)
{
    (void) enable_progress_threads;
    /* MPI_THREAD_MULTIPLE is fine: no global data-path state. Threads may share cores
     * then, so the wait for a collective yields (coll_gpu_cuda_wait_polls auto), and our
     * stream stays non-blocking (coll_gpu_cuda_stream_order auto: see cgpu_cuda_comm.c). */
    if (mca_coll_gpu_component.engine_up) {
        cgpu_engine_set_threads(enable_mpi_threads);
    }
    mca_coll_gpu_component_t *c = &mca_coll_gpu_component;
    if (c->nb_engine < 0) { /* auto: on at every thread level (the parameter's help) */
        c->nb_engine = 1;
    }
    return OMPI_SUCCESS;
}

/* A slot of ours whose previous module provides nothing is emptied, so Open MPI never
 * routes a call to a wrapper with nothing to fall back on (the engine paths need the
 * previous module for host-only calls and the bootstrap). */
static void gpu_module_keep_served(mca_coll_gpu_module_t *m)
{
#define CGPU_KEEP(name)                                                                            \
    if (NULL == m->prev.coll_##name) {                                                             \
        m->super.coll_##name = NULL;                                                               \
    }
    CGPU_OPTIONAL_SLOTS(CGPU_KEEP)
#undef CGPU_KEEP
}

/* The persistent forms (MPIX_*_init), each where this module has the non-blocking form its
 * MPI_Start posts: installed at enable, after the slots are settled, for every kind of
 * communicator (the non-blocking forms of intercommunicators and single ranks are theirs). */
static void gpu_module_persist_install(mca_coll_gpu_module_t *m)
{
    mca_coll_base_module_t *s = &m->super;
#define CGPU_PERSIST(name)                                                                         \
    s->coll_##name##_init = NULL != s->coll_i##name ? mca_coll_gpu_##name##_init : NULL;
    CGPU_PERSIST(allgather)
    CGPU_PERSIST(allgatherv)
    CGPU_PERSIST(allreduce)
    CGPU_PERSIST(alltoall)
    CGPU_PERSIST(alltoallv)
    CGPU_PERSIST(alltoallw)
    CGPU_PERSIST(bcast)
    CGPU_PERSIST(exscan)
    CGPU_PERSIST(gather)
    CGPU_PERSIST(gatherv)
    CGPU_PERSIST(reduce)
    CGPU_PERSIST(reduce_scatter)
    CGPU_PERSIST(reduce_scatter_block)
    CGPU_PERSIST(scan)
    CGPU_PERSIST(scatter)
    CGPU_PERSIST(scatterv)
    CGPU_PERSIST(neighbor_allgather)
    CGPU_PERSIST(neighbor_allgatherv)
    CGPU_PERSIST(neighbor_alltoall)
    CGPU_PERSIST(neighbor_alltoallv)
    CGPU_PERSIST(neighbor_alltoallw)
#undef CGPU_PERSIST
}

static int gpu_module_enable(mca_coll_base_module_t *module, struct ompi_communicator_t *comm)
{
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    mca_coll_base_comm_coll_t *cc = comm->c_coll;

    if (NULL == cc->coll_allreduce || NULL == cc->coll_alltoall || NULL == cc->coll_allgather ||
        NULL == cc->coll_barrier) {
        cgpu_log(CGPU_LOG_WARN,
                 "no other coll component provides allreduce/alltoall/allgather/"
                 "barrier on communicator %s, so there is nothing to fall back on; include "
                 "more components, e.g. --mca coll gpu,tuned,libnbc,basic,self",
                 comm->c_name);
        return OMPI_ERROR;
    }
    m->prev = *cc;
    for (size_t i = 0; i < PREV_NSLOTS; ++i) {
        mca_coll_base_module_t **slot = prev_slot(m, i);
        if (NULL != *slot) {
            OBJ_RETAIN(*slot);
        }
    }
    m->prev_saved = true;
    gpu_module_keep_served(m);
    gpu_module_persist_install(m);
    m->comm = comm;
    mca_coll_gpu_bootstrap_setup(m);
    return OMPI_SUCCESS;
}

/* Open MPI calls this once per slot we own, while it frees the communicator. The
 * previous modules are released in the destructor (exactly once, when the last
 * reference goes): a collective another thread may still be running on this
 * communicator (erroneous, but it must not crash) can still call them. */
static int gpu_module_disable(mca_coll_base_module_t *module, struct ompi_communicator_t *comm)
{
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    cgpu_comm_t *ec = __atomic_load_n(&m->ecomm, __ATOMIC_ACQUIRE);
    if (NULL != ec && cgpu_comm_busy(ec) && !m->misuse_reported) {
        m->misuse_reported = true;
        cgpu_log(CGPU_LOG_WARN,
                 "communicator %s is being freed while another thread is inside a "
                 "collective on it (MPI forbids this); its resources are released when that "
                 "collective ends",
                 NULL != comm ? comm->c_name : "?");
    }
    return OMPI_SUCCESS;
}

/* An intracommunicator of two ranks or more: every collective with a buffer, blocking and
 * non-blocking (each entry point takes the engine or the staged previous module), the
 * barriers, and the neighborhood collectives (staged). */
static void gpu_module_install(mca_coll_gpu_module_t *m)
{
    mca_coll_base_module_t *s = &m->super;
    /* no data: the previous module's, refused once the communicator lost a process */
    s->coll_barrier = mca_coll_gpu_barrier;
    s->coll_ibarrier = mca_coll_gpu_ibarrier;
    s->coll_allreduce = mca_coll_gpu_allreduce;
    s->coll_alltoall = mca_coll_gpu_alltoall;
    s->coll_bcast = mca_coll_gpu_bcast;
    s->coll_reduce = mca_coll_gpu_reduce;
    s->coll_allgather = mca_coll_gpu_allgather;
    s->coll_allgatherv = mca_coll_gpu_allgatherv;
    s->coll_gather = mca_coll_gpu_gather;
    s->coll_gatherv = mca_coll_gpu_gatherv;
    s->coll_scatter = mca_coll_gpu_scatter;
    s->coll_scatterv = mca_coll_gpu_scatterv;
    s->coll_alltoallv = mca_coll_gpu_alltoallv;
    s->coll_alltoallw = mca_coll_gpu_alltoallw;
    s->coll_reduce_scatter = mca_coll_gpu_reduce_scatter;
    s->coll_reduce_scatter_block = mca_coll_gpu_reduce_scatter_block;
    s->coll_scan = mca_coll_gpu_scan;
    s->coll_exscan = mca_coll_gpu_exscan;
    /* the non-blocking forms from the list coll_gpu_nb_engine's help is written from */
#define NB_INSTALL(slot, mpi) s->coll_##slot = mca_coll_gpu_##slot;
    MCA_COLL_GPU_NB_ENGINE_OPS(NB_INSTALL)
#undef NB_INSTALL
    mca_coll_gpu_neighbor_install(m);
}

mca_coll_base_module_t *mca_coll_gpu_comm_query(struct ompi_communicator_t *comm, int *priority)
{
    mca_coll_gpu_component_t *c = &mca_coll_gpu_component;

    if (c->priority < 0 || !c->engine_up) {
        cgpu_log(10, "comm %s: declined (%s)", comm->c_name,
                 c->priority < 0 ? "coll_gpu_priority < 0" : "engine not started");
        return NULL;
    }
    if (CGPU_BACKEND_HOST != c->backend && !cgpu_engine_gpu_present()) {
        /* auto/cuda without a GPU here: leave every call to the other components. (GPU
         * presence must be the same on every rank of a job in auto mode.) Asked without
         * initializing CUDA where the driver's files answer: that costs tens of ms a process
         * in MPI_Init, and the application initializes it anyway before its first device
         * buffer; the communicator's set-up at its first collective asks the runtime, and
         * takes the host backend where a rank has none after all. */
        cgpu_log(10,
                 "comm %s: declined (backend %s: no usable GPU or CUDA not "
                 "built; coll_gpu_backend=host serves host buffers)",
                 comm->c_name, CGPU_BACKEND_CUDA == c->backend ? "cuda" : "auto");
        return NULL;
    }

    if (OMPI_COMM_IS_INTER(comm)) {
        /* no engine path: every collective with a buffer staged (device buffers never
         * reach coll/inter, coll/basic or libnbc) */
        mca_coll_gpu_module_t *m = OBJ_NEW(mca_coll_gpu_module_t);
        if (NULL == m) {
            return NULL;
        }
        m->super.coll_module_enable = gpu_module_enable;
        m->super.coll_module_disable = gpu_module_disable;
        mca_coll_gpu_inter_install(m);
        *priority = c->priority;
        cgpu_log(10,
                 "comm %s: intercommunicator (%d and %d ranks): staged "
                 "through host memory (priority %d)",
                 comm->c_name, ompi_comm_size(comm), ompi_comm_remote_size(comm), c->priority);
        return &m->super;
    }
    if (1 == ompi_comm_size(comm) && c->self_priority < 0) {
        cgpu_log(10,
                 "comm %s: declined (single rank and "
                 "coll_gpu_self_priority < 0)",
                 comm->c_name);
        return NULL;
    }
    mca_coll_gpu_module_t *m = OBJ_NEW(mca_coll_gpu_module_t);
    if (NULL == m) {
        return NULL;
    }
    m->super.coll_module_enable = gpu_module_enable;
    m->super.coll_module_disable = gpu_module_disable;
    if (1 == ompi_comm_size(comm)) {
        /* one rank: local copies, above coll/self (whose memcpy would take device pointers) */
        mca_coll_gpu_self_install(m);
        mca_coll_gpu_neighbor_install(m);
        *priority = c->self_priority;
        cgpu_log(10, "comm %s: serving a single rank (local copies, priority %d)", comm->c_name,
                 c->self_priority);
        return &m->super;
    }
    gpu_module_install(m);
    *priority = c->priority;
    cgpu_log(10, "comm %s: serving %d ranks (backend %s, priority %d)", comm->c_name,
             ompi_comm_size(comm), CGPU_BACKEND_HOST == c->backend ? "host" : "cuda", c->priority);
    return &m->super;
}

bool mca_coll_gpu_is_ours(const mca_coll_base_module_t *module)
{
    return NULL != module && gpu_module_enable == module->coll_module_enable;
}

/* Our module on this communicator, found through the slots we serve (a pointer compare
 * on the enable function identifies our modules). NULL when we do not serve it. */
mca_coll_gpu_module_t *mca_coll_gpu_module_of(struct ompi_communicator_t *comm)
{
    if (NULL == comm || NULL == comm->c_coll) {
        return NULL;
    }
    mca_coll_base_module_t *cand[2] = {comm->c_coll->coll_allreduce_module,
                                       comm->c_coll->coll_alltoall_module};
    for (int i = 0; i < 2; ++i) {
        if (mca_coll_gpu_is_ours(cand[i])) {
            return (mca_coll_gpu_module_t *) cand[i];
        }
    }
    return NULL;
}
