/*
 * coll/gpu: the value tables behind the texts of the MCA parameters and pvars.
 *
 * A help text that lists the values of an enum is built from the same table the code hands
 * to Open MPI as the enumerator (what ompi_info's "Valid values" and MPI_T tools read), so the
 * two cannot disagree. The tables of the engine's RAS enums are indexed by the enum: each one's
 * length is checked against the enum's last value, and each has an accessor whose switch has
 * no default, so -Wswitch (an error under --enable-werror) names a value added to the enum
 * (cgpu_engine.h) that has no row here.
 */
#ifndef MCA_COLL_GPU_PARAMS_H
#define MCA_COLL_GPU_PARAMS_H

#include <stddef.h>

#include "opal/mca/base/mca_base_var_enum.h"

#include "cgpu_engine.h"

/** One value of an enumerated MCA parameter or pvar. */
typedef struct mca_coll_gpu_value {
    int value;
    const char *name; /* what the user writes, and what MPI_T_enum_get_item returns */
    const char *help; /* what it means, or NULL where the name says it all */
} mca_coll_gpu_value_t;

#define MCA_COLL_GPU_NVALUES(table) (sizeof(table) / sizeof((table)[0]))
/* a row of a table indexed by its enum: the value is its own index */
#define MCA_COLL_GPU_VALUE(e, name, help) [e] = {(e), (name), (help)}

/* ---- pvar coll_gpu_state: cgpu_ras_state_t ---- */
static const mca_coll_gpu_value_t mca_coll_gpu_state_values[] = {
    MCA_COLL_GPU_VALUE(CGPU_RAS_INITIALIZING, "initializing", "not used yet"),
    MCA_COLL_GPU_VALUE(CGPU_RAS_READY, "ready", NULL),
    MCA_COLL_GPU_VALUE(CGPU_RAS_DEGRADED, "degraded",
                       "set-up failed on some rank: every call uses the previous coll module"),
    MCA_COLL_GPU_VALUE(CGPU_RAS_FAILED, "failed",
                       "a collective timed out or hit a device error: calls return errors"),
};
_Static_assert(MCA_COLL_GPU_NVALUES(mca_coll_gpu_state_values) == CGPU_RAS_FAILED + 1,
               "a cgpu_ras_state_t value without a row in mca_coll_gpu_state_values");

static inline const mca_coll_gpu_value_t *mca_coll_gpu_state_value(cgpu_ras_state_t s)
{
    switch (s) { /* no default: see the top of this file */
    case CGPU_RAS_INITIALIZING:
    case CGPU_RAS_READY:
    case CGPU_RAS_DEGRADED:
    case CGPU_RAS_FAILED:
        return &mca_coll_gpu_state_values[s];
    }
    return NULL;
}

/* ---- pvar coll_gpu_algorithm: cgpu_ras_alg_t ---- */
static const mca_coll_gpu_value_t mca_coll_gpu_alg_values[] = {
    MCA_COLL_GPU_VALUE(CGPU_RAS_ALG_NONE, "none", "no engine collective yet"),
    MCA_COLL_GPU_VALUE(CGPU_RAS_ALG_RING, "ring", "and the chains along it"),
    MCA_COLL_GPU_VALUE(CGPU_RAS_ALG_ONESHOT, "oneshot", "launched or resident"),
    MCA_COLL_GPU_VALUE(CGPU_RAS_ALG_TREE, "tree", NULL),
    MCA_COLL_GPU_VALUE(CGPU_RAS_ALG_DIRECT, "direct", "the alltoall's"),
    MCA_COLL_GPU_VALUE(CGPU_RAS_ALG_COPY_ENGINE, "copy_engine", "the GPUs' copy engines"),
    MCA_COLL_GPU_VALUE(CGPU_RAS_ALG_HIERARCHICAL, "hierarchical",
                       "across nodes: steps inside each node, the proxy between them"),
    MCA_COLL_GPU_VALUE(CGPU_RAS_ALG_PROXY, "proxy", "across nodes: the proxy only"),
};
_Static_assert(MCA_COLL_GPU_NVALUES(mca_coll_gpu_alg_values) == CGPU_RAS_ALG_PROXY + 1,
               "a cgpu_ras_alg_t value without a row in mca_coll_gpu_alg_values");

static inline const mca_coll_gpu_value_t *mca_coll_gpu_alg_value(cgpu_ras_alg_t a)
{
    switch (a) { /* no default: see the top of this file */
    case CGPU_RAS_ALG_NONE:
    case CGPU_RAS_ALG_RING:
    case CGPU_RAS_ALG_ONESHOT:
    case CGPU_RAS_ALG_TREE:
    case CGPU_RAS_ALG_DIRECT:
    case CGPU_RAS_ALG_COPY_ENGINE:
    case CGPU_RAS_ALG_HIERARCHICAL:
    case CGPU_RAS_ALG_PROXY:
        return &mca_coll_gpu_alg_values[a];
    }
    return NULL;
}

/* ---- pvar coll_gpu_transport: cgpu_ras_transport_t ---- */
static const mca_coll_gpu_value_t mca_coll_gpu_transport_values[] = {
    MCA_COLL_GPU_VALUE(CGPU_RAS_TRANSPORT_SHM, "shm", "one node, host shared memory"),
    MCA_COLL_GPU_VALUE(CGPU_RAS_TRANSPORT_CUDA_IPC, "cuda_ipc",
                       "one node, CUDA IPC between the GPUs"),
    MCA_COLL_GPU_VALUE(CGPU_RAS_TRANSPORT_PROXY_SHM, "proxy+shm",
                       "several nodes and ranks on this one: shm inside it"),
    MCA_COLL_GPU_VALUE(CGPU_RAS_TRANSPORT_PROXY_CUDA_IPC, "proxy+cuda_ipc",
                       "several nodes and ranks on this one: CUDA IPC "
                       "inside it"),
    MCA_COLL_GPU_VALUE(CGPU_RAS_TRANSPORT_PROXY, "proxy", "several nodes, one rank on this one"),
};
_Static_assert(MCA_COLL_GPU_NVALUES(mca_coll_gpu_transport_values) == CGPU_RAS_TRANSPORT_PROXY + 1,
               "a cgpu_ras_transport_t value without a row in mca_coll_gpu_transport_values");

static inline const mca_coll_gpu_value_t *mca_coll_gpu_transport_value(cgpu_ras_transport_t t)
{
    switch (t) { /* no default: see the top of this file */
    case CGPU_RAS_TRANSPORT_SHM:
    case CGPU_RAS_TRANSPORT_CUDA_IPC:
    case CGPU_RAS_TRANSPORT_PROXY_SHM:
    case CGPU_RAS_TRANSPORT_PROXY_CUDA_IPC:
    case CGPU_RAS_TRANSPORT_PROXY:
        return &mca_coll_gpu_transport_values[t];
    }
    return NULL;
}

/*
 * The non-blocking collectives that have an engine path (coll_gpu_nb_engine switches it), as
 * X(slot, MPI name): the coll_<slot> entry points the module serves on communicators of two
 * or more ranks. The help of coll_gpu_nb_engine lists them from here; test/mpi/check_config.sh
 * checks the list against the entry points the module installs.
 */
// clang-format off
#define MCA_COLL_GPU_NB_ENGINE_OPS(X)                                                         \
    X(iallreduce, "MPI_Iallreduce") X(ireduce, "MPI_Ireduce")                                 \
    X(ireduce_scatter_block, "MPI_Ireduce_scatter_block")                                     \
    X(ireduce_scatter, "MPI_Ireduce_scatter") X(iscan, "MPI_Iscan") X(iexscan, "MPI_Iexscan") \
    X(ibcast, "MPI_Ibcast") X(iallgather, "MPI_Iallgather") X(iallgatherv, "MPI_Iallgatherv") \
    X(igather, "MPI_Igather") X(igatherv, "MPI_Igatherv") X(iscatter, "MPI_Iscatter")         \
    X(iscatterv, "MPI_Iscatterv") X(ialltoall, "MPI_Ialltoall")                               \
    X(ialltoallv, "MPI_Ialltoallv") X(ialltoallw, "MPI_Ialltoallw")
// clang-format on

/**
 * The text "<intro> Values: a (help), b, c (help).<outro>" (numbered: "0 a (help), 1 b, ..."),
 * listing @p n values of @p v in order. malloc'd; NULL without memory.
 */
char *mca_coll_gpu_values_text(const char *intro, const mca_coll_gpu_value_t *v, size_t n,
                               bool numbered, const char *outro);

/**
 * The enumerator of @p n values of @p v, named @p name (an MCA parameter's or a pvar's).
 * @return OPAL_SUCCESS, or an Open MPI error (then *out is NULL).
 */
int mca_coll_gpu_values_enum(const char *name, const mca_coll_gpu_value_t *v, size_t n,
                             mca_base_var_enum_t **out);

/** Register every MCA parameter and pvar of the component (its register callback). */
int mca_coll_gpu_params_register(void);

/** At open: check every number against its row (a bad one: one line, the default), the
 * priorities and the coll list. False when the coll list leaves us nothing to fall back on:
 * the component then stays out of the job. */
bool mca_coll_gpu_params_check(void);

/** Whether this process is the first rank of its node (it speaks for what differs by node). */
bool mca_coll_gpu_node_speaker(void);

#endif /* MCA_COLL_GPU_PARAMS_H */
