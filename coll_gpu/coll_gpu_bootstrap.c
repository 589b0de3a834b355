/*
 * coll/gpu: the engine communicator's set-up: the engine's bootstrap (allgather, barrier on
 * host bytes) built from the previous coll module saved at enable time, the creation of the
 * engine communicator through a bootstrap (this one, or a worker's:
 * coll_gpu_nb_bootstrap.c), and the nodes the ranks are on. Only host memory ever passes
 * through a bootstrap.
 *
 * Apart from the module because the blocking path (mca_coll_gpu_lazy_init) and the workers
 * of the non-blocking path both create engine communicators, and neither may depend on the
 * module file that installs them.
 */
#define CGPU_LOG_SUBSYS CGPU_SUB_INIT
#include "coll_gpu.h"

#include "ompi/proc/proc.h"
#include "opal/util/output.h"

static cgpu_status_t boot_allgather(void *ctx, const void *sbuf, void *rbuf, size_t bytes)
{
    mca_coll_gpu_module_t *m = ctx;
    if (bytes > (size_t) INT_MAX) {
        return CGPU_ERR_INVALID_ARG;
    }
    int rc =
        MCA_COLL_GPU_PREV(m->prev.coll_allgather(sbuf, (int) bytes, MPI_BYTE, rbuf, (int) bytes,
                                                 MPI_BYTE, m->comm, m->prev.coll_allgather_module));
    return OMPI_SUCCESS == rc ? CGPU_OK : CGPU_ERR_BOOTSTRAP;
}

static cgpu_status_t boot_barrier(void *ctx)
{
    mca_coll_gpu_module_t *m = ctx;
    int rc = MCA_COLL_GPU_PREV(m->prev.coll_barrier(m->comm, m->prev.coll_barrier_module));
    return OMPI_SUCCESS == rc ? CGPU_OK : CGPU_ERR_BOOTSTRAP;
}

void mca_coll_gpu_bootstrap_setup(mca_coll_gpu_module_t *m)
{
    m->bootstrap.ctx = m;
    m->bootstrap.rank = ompi_comm_rank(m->comm);
    m->bootstrap.size = ompi_comm_size(m->comm);
    m->bootstrap.context_id = ompi_comm_get_cid(m->comm);
    m->bootstrap.allgather = boot_allgather;
    m->bootstrap.barrier = boot_barrier;
}

int mca_coll_gpu_fake_node(long rank, long size)
{
    const long nodes = mca_coll_gpu_component.fake_nodes;
    return size > 0 && rank >= 0 && rank < size ? (int) (rank * nodes / size) : 0;
}

bool mca_coll_gpu_one_node(struct ompi_communicator_t *comm)
{
    /* under coll_gpu_fake_nodes the engine sees several nodes where Open MPI sees one: the
     * answer must be the engine's, so that a test on one machine takes the paths of a
     * cluster (a communicator across nodes never gets a worker set-up, for instance) */
    const bool fake = mca_coll_gpu_component.fake_nodes > 0;
    const long wsize = ompi_comm_size(&ompi_mpi_comm_world.comm);
    const int mine =
        fake ? mca_coll_gpu_fake_node(ompi_proc_local()->super.proc_name.vpid, wsize) : 0;
    for (int i = 0; i < ompi_comm_size(comm); ++i) {
        const ompi_proc_t *p = ompi_comm_peer_lookup(comm, i);
        if (NULL == p || !OPAL_PROC_ON_LOCAL_NODE(p->super.proc_flags)) {
            return false;
        }
        if (fake && mca_coll_gpu_fake_node(p->super.proc_name.vpid, wsize) != mine) {
            return false;
        }
    }
    return true;
}

/* The engine sets up on the current device: make it the device of the call's first buffer
 * when that is device memory (4 ranks on 2 GPUs each pick theirs); returns the device to
 * restore afterwards, or -1. */
static int enter_buf_device(const void *buf)
{
    int dev = -1, prev = cgpu_engine_current_device();
    if (CGPU_BUF_HOST == cgpu_buf_kind(buf, &dev) || dev == prev || prev < 0) {
        return -1;
    }
    (void) cgpu_engine_set_device(dev);
    return prev;
}

static void leave_buf_device(int prev)
{
    if (prev >= 0) {
        (void) cgpu_engine_set_device(prev);
    }
}

void mca_coll_gpu_create(mca_coll_gpu_module_t *m, const void *buf, const cgpu_bootstrap_t *bs)
{
    const int prev = enter_buf_device(buf);
    /* Collective: every rank of the communicator is in this same call (the path
     * decision before it depends only on arguments MPI requires to match). */
    cgpu_comm_t *ec = NULL;
    cgpu_status_t st = cgpu_comm_create(bs, &ec);
    leave_buf_device(prev);
    if (CGPU_OK == st) {
        cgpu_comm_describe(ec, m->comm->c_name, (uint64_t) m->comm->c_contextid);
        cgpu_comm_set_bootstrap(ec, &m->bootstrap); /* later rounds: the application's */
        /* published last: pvar readers on other threads load it atomically */
        __atomic_store_n(&m->ecomm, ec, __ATOMIC_RELEASE);
        __atomic_store_n(&m->state, CGPU_MODULE_READY, __ATOMIC_RELEASE);
        cgpu_log(10, "comm %s: engine communicator ready", m->comm->c_name);
    } else {
        __atomic_store_n(&m->state, CGPU_MODULE_FALLBACK, __ATOMIC_RELEASE);
        cgpu_log(10,
                 "comm %s: engine set-up failed on some rank (%s); every "
                 "call on it uses the previous coll module",
                 m->comm->c_name, cgpu_status_string(st));
    }
}

void mca_coll_gpu_settle(mca_coll_gpu_module_t *m, const void *buf, const cgpu_bootstrap_t *bs)
{
    if (!cgpu_comm_settle_due(m->ecomm)) {
        return; /* asked before the device is looked up: most calls do not ask */
    }
    const int prev = enter_buf_device(buf);
    /* collective, like the set-up: every rank is in this same call */
    const cgpu_status_t st = cgpu_comm_settle(m->ecomm, bs);
    leave_buf_device(prev);
    if (CGPU_OK != st) {
        /* the exchange itself failed (the previous module's allgather): the call that
         * follows reports the communicator's state; nothing was changed */
        cgpu_log(CGPU_LOG_INFO, "comm %s: asking whether the ranks chose GPUs failed (%s)",
                 m->comm->c_name, cgpu_status_string(st));
    } else if (!cgpu_comm_unsettled(m->ecomm)) {
        cgpu_log(10, "comm %s: every rank has chosen its GPU: backend %s", m->comm->c_name,
                 CGPU_BACKEND_CUDA == cgpu_comm_backend(m->ecomm) ? "cuda" : "host");
    }
}
