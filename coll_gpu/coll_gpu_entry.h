/*
 * coll/gpu: the MPI entry points, one file per collective (or family), blocking,
 * non-blocking and persistent forms side by side, as Open MPI's coll components lay them
 * out; coll_gpu_module.c fills the module's function slots from these declarations.
 *
 * Apart from coll_gpu.h so that the machinery below the entry points (staging, mirrors,
 * the non-blocking requests and workers) cannot call them: only the entry files and the
 * module include this header.
 */
#ifndef MCA_COLL_GPU_ENTRY_H
#define MCA_COLL_GPU_ENTRY_H

#include "coll_gpu.h"

#include "ompi/request/request.h"

BEGIN_C_DECLS

/* ---- MPI_Barrier, MPI_Ibarrier (coll_gpu_barrier.c) ---- */

int mca_coll_gpu_barrier(struct ompi_communicator_t *comm, mca_coll_base_module_t *module);
int mca_coll_gpu_ibarrier(struct ompi_communicator_t *comm, ompi_request_t **request,
                          mca_coll_base_module_t *module);

/* ---- MPI_Allreduce (coll_gpu_allreduce.c) ---- */

int mca_coll_gpu_allreduce(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dtype,
                           struct ompi_op_t *op, struct ompi_communicator_t *comm,
                           mca_coll_base_module_t *module);
int mca_coll_gpu_iallreduce(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dtype,
                            struct ompi_op_t *op, struct ompi_communicator_t *comm,
                            ompi_request_t **request, mca_coll_base_module_t *module);
int mca_coll_gpu_allreduce_init(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dt,
                                struct ompi_op_t *op, struct ompi_communicator_t *comm,
                                struct ompi_info_t *info, ompi_request_t **request,
                                mca_coll_base_module_t *module);

/* ---- MPI_Alltoall (coll_gpu_alltoall.c) ---- */

int mca_coll_gpu_alltoall(const void *sbuf, int scount, struct ompi_datatype_t *sdtype, void *rbuf,
                          int rcount, struct ompi_datatype_t *rdtype,
                          struct ompi_communicator_t *comm, mca_coll_base_module_t *module);
int mca_coll_gpu_ialltoall(const void *sbuf, int scount, struct ompi_datatype_t *sdt, void *rbuf,
                           int rcount, struct ompi_datatype_t *rdt,
                           struct ompi_communicator_t *comm, ompi_request_t **request,
                           mca_coll_base_module_t *module);
int mca_coll_gpu_alltoall_init(const void *sbuf, int scount, struct ompi_datatype_t *sdt,
                               void *rbuf, int rcount, struct ompi_datatype_t *rdt,
                               struct ompi_communicator_t *comm, struct ompi_info_t *info,
                               ompi_request_t **request, mca_coll_base_module_t *module);

/* ---- MPI_Bcast (coll_gpu_bcast.c) ---- */

int mca_coll_gpu_bcast(void *buf, int count, struct ompi_datatype_t *dt, int root,
                       struct ompi_communicator_t *comm, mca_coll_base_module_t *module);
int mca_coll_gpu_ibcast(void *buf, int count, struct ompi_datatype_t *dtype, int root,
                        struct ompi_communicator_t *comm, ompi_request_t **request,
                        mca_coll_base_module_t *module);
int mca_coll_gpu_bcast_init(void *buf, int count, struct ompi_datatype_t *dt, int root,
                            struct ompi_communicator_t *comm, struct ompi_info_t *info,
                            ompi_request_t **request, mca_coll_base_module_t *module);

/* ---- MPI_Allgather(v), MPI_Gather, MPI_Scatter (coll_gpu_gather.c) ---- */

int mca_coll_gpu_allgather(const void *sbuf, int scount, struct ompi_datatype_t *sdt, void *rbuf,
                           int rcount, struct ompi_datatype_t *rdt,
                           struct ompi_communicator_t *comm, mca_coll_base_module_t *module);
int mca_coll_gpu_allgatherv(const void *sbuf, int scount, struct ompi_datatype_t *sdt, void *rbuf,
                            const int *rcounts, const int *displs, struct ompi_datatype_t *rdt,
                            struct ompi_communicator_t *comm, mca_coll_base_module_t *module);
int mca_coll_gpu_gather(const void *sbuf, int scount, struct ompi_datatype_t *sdt, void *rbuf,
                        int rcount, struct ompi_datatype_t *rdt, int root,
                        struct ompi_communicator_t *comm, mca_coll_base_module_t *module);
int mca_coll_gpu_scatter(const void *sbuf, int scount, struct ompi_datatype_t *sdt, void *rbuf,
                         int rcount, struct ompi_datatype_t *rdt, int root,
                         struct ompi_communicator_t *comm, mca_coll_base_module_t *module);
int mca_coll_gpu_iallgather(const void *sbuf, int scount, struct ompi_datatype_t *sdt, void *rbuf,
                            int rcount, struct ompi_datatype_t *rdt,
                            struct ompi_communicator_t *comm, ompi_request_t **request,
                            mca_coll_base_module_t *module);
int mca_coll_gpu_iallgatherv(const void *sbuf, int scount, struct ompi_datatype_t *sdt, void *rbuf,
                             const int *rcounts, const int *displs, struct ompi_datatype_t *rdt,
                             struct ompi_communicator_t *comm, ompi_request_t **request,
                             mca_coll_base_module_t *module);
int mca_coll_gpu_igather(const void *sbuf, int scount, struct ompi_datatype_t *sdt, void *rbuf,
                         int rcount, struct ompi_datatype_t *rdt, int root,
                         struct ompi_communicator_t *comm, ompi_request_t **request,
                         mca_coll_base_module_t *module);
int mca_coll_gpu_iscatter(const void *sbuf, int scount, struct ompi_datatype_t *sdt, void *rbuf,
                          int rcount, struct ompi_datatype_t *rdt, int root,
                          struct ompi_communicator_t *comm, ompi_request_t **request,
                          mca_coll_base_module_t *module);
int mca_coll_gpu_allgather_init(const void *sbuf, int scount, struct ompi_datatype_t *sdt,
                                void *rbuf, int rcount, struct ompi_datatype_t *rdt,
                                struct ompi_communicator_t *comm, struct ompi_info_t *info,
                                ompi_request_t **request, mca_coll_base_module_t *module);
int mca_coll_gpu_allgatherv_init(const void *sbuf, int scount, struct ompi_datatype_t *sdt,
                                 void *rbuf, const int *rcounts, const int *displs,
                                 struct ompi_datatype_t *rdt, struct ompi_communicator_t *comm,
                                 struct ompi_info_t *info, ompi_request_t **request,
                                 mca_coll_base_module_t *module);
int mca_coll_gpu_gather_init(const void *sbuf, int scount, struct ompi_datatype_t *sdt, void *rbuf,
                             int rcount, struct ompi_datatype_t *rdt, int root,
                             struct ompi_communicator_t *comm, struct ompi_info_t *info,
                             ompi_request_t **request, mca_coll_base_module_t *module);
int mca_coll_gpu_scatter_init(const void *sbuf, int scount, struct ompi_datatype_t *sdt, void *rbuf,
                              int rcount, struct ompi_datatype_t *rdt, int root,
                              struct ompi_communicator_t *comm, struct ompi_info_t *info,
                              ompi_request_t **request, mca_coll_base_module_t *module);
/* The engine communicator for a call padded to @p bytes per rank (the same on every rank),
 * or NULL: the staged path then serves the call on every rank (nested calls, @p off (the
 * algorithm "fallback"), 0 bytes, n x bytes above coll_gpu_gather_scratch_bytes, no engine;
 * for the padded blocking calls of coll_gpu_gather.c and coll_gpu_vcoll.c) */
cgpu_comm_t *mca_coll_gpu_padded_engine(mca_coll_gpu_module_t *m, bool off, size_t bytes,
                                        const void *buf, int n);

/* ---- MPI_Gatherv, MPI_Scatterv, MPI_Alltoallv, MPI_Alltoallw (coll_gpu_vcoll.c) ---- */

int mca_coll_gpu_gatherv(const void *sbuf, int scount, struct ompi_datatype_t *sdt, void *rbuf,
                         const int *rcounts, const int *displs, struct ompi_datatype_t *rdt,
                         int root, struct ompi_communicator_t *comm,
                         mca_coll_base_module_t *module);
int mca_coll_gpu_scatterv(const void *sbuf, const int *scounts, const int *displs,
                          struct ompi_datatype_t *sdt, void *rbuf, int rcount,
                          struct ompi_datatype_t *rdt, int root, struct ompi_communicator_t *comm,
                          mca_coll_base_module_t *module);
int mca_coll_gpu_alltoallv(const void *sbuf, const int *scounts, const int *sdispls,
                           struct ompi_datatype_t *sdt, void *rbuf, const int *rcounts,
                           const int *rdispls, struct ompi_datatype_t *rdt,
                           struct ompi_communicator_t *comm, mca_coll_base_module_t *module);
/* MPI_Alltoallw on the engine where every block's type is gap-free */
int mca_coll_gpu_alltoallw(const void *sbuf, const int *scounts, const int *sdispls,
                           struct ompi_datatype_t *const *sdts, void *rbuf, const int *rcounts,
                           const int *rdispls, struct ompi_datatype_t *const *rdts,
                           struct ompi_communicator_t *comm, mca_coll_base_module_t *module);
int mca_coll_gpu_igatherv(const void *sbuf, int scount, struct ompi_datatype_t *sdt, void *rbuf,
                          const int *rcounts, const int *displs, struct ompi_datatype_t *rdt,
                          int root, struct ompi_communicator_t *comm, ompi_request_t **request,
                          mca_coll_base_module_t *module);
int mca_coll_gpu_iscatterv(const void *sbuf, const int *scounts, const int *displs,
                           struct ompi_datatype_t *sdt, void *rbuf, int rcount,
                           struct ompi_datatype_t *rdt, int root, struct ompi_communicator_t *comm,
                           ompi_request_t **request, mca_coll_base_module_t *module);
int mca_coll_gpu_ialltoallv(const void *sbuf, const int *scounts, const int *sdispls,
                            struct ompi_datatype_t *sdt, void *rbuf, const int *rcounts,
                            const int *rdispls, struct ompi_datatype_t *rdt,
                            struct ompi_communicator_t *comm, ompi_request_t **request,
                            mca_coll_base_module_t *module);
int mca_coll_gpu_ialltoallw(const void *sbuf, const int *scounts, const int *sdispls,
                            struct ompi_datatype_t *const *sdts, void *rbuf, const int *rcounts,
                            const int *rdispls, struct ompi_datatype_t *const *rdts,
                            struct ompi_communicator_t *comm, ompi_request_t **request,
                            mca_coll_base_module_t *module);
int mca_coll_gpu_gatherv_init(const void *sbuf, int scount, struct ompi_datatype_t *sdt, void *rbuf,
                              const int *rcounts, const int *displs, struct ompi_datatype_t *rdt,
                              int root, struct ompi_communicator_t *comm, struct ompi_info_t *info,
                              ompi_request_t **request, mca_coll_base_module_t *module);
int mca_coll_gpu_scatterv_init(const void *sbuf, const int *scounts, const int *displs,
                               struct ompi_datatype_t *sdt, void *rbuf, int rcount,
                               struct ompi_datatype_t *rdt, int root,
                               struct ompi_communicator_t *comm, struct ompi_info_t *info,
                               ompi_request_t **request, mca_coll_base_module_t *module);
int mca_coll_gpu_alltoallv_init(const void *sbuf, const int *scounts, const int *sdispls,
                                struct ompi_datatype_t *sdt, void *rbuf, const int *rcounts,
                                const int *rdispls, struct ompi_datatype_t *rdt,
                                struct ompi_communicator_t *comm, struct ompi_info_t *info,
                                ompi_request_t **request, mca_coll_base_module_t *module);
int mca_coll_gpu_alltoallw_init(const void *sbuf, const int *scounts, const int *sdispls,
                                struct ompi_datatype_t *const *sdts, void *rbuf, const int *rcounts,
                                const int *rdispls, struct ompi_datatype_t *const *rdts,
                                struct ompi_communicator_t *comm, struct ompi_info_t *info,
                                ompi_request_t **request, mca_coll_base_module_t *module);

/* ---- MPI_Reduce, MPI_Reduce_scatter(_block), MPI_Scan, MPI_Exscan (coll_gpu_reduce.c) ---- */

int mca_coll_gpu_reduce(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dt,
                        struct ompi_op_t *op, int root, struct ompi_communicator_t *comm,
                        mca_coll_base_module_t *module);
int mca_coll_gpu_reduce_scatter_block(const void *sbuf, void *rbuf, int rcount,
                                      struct ompi_datatype_t *dt, struct ompi_op_t *op,
                                      struct ompi_communicator_t *comm,
                                      mca_coll_base_module_t *module);
int mca_coll_gpu_reduce_scatter(const void *sbuf, void *rbuf, const int *rcounts,
                                struct ompi_datatype_t *dt, struct ompi_op_t *op,
                                struct ompi_communicator_t *comm, mca_coll_base_module_t *module);
int mca_coll_gpu_scan(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dt,
                      struct ompi_op_t *op, struct ompi_communicator_t *comm,
                      mca_coll_base_module_t *module);
int mca_coll_gpu_exscan(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dt,
                        struct ompi_op_t *op, struct ompi_communicator_t *comm,
                        mca_coll_base_module_t *module);
int mca_coll_gpu_ireduce(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dtype,
                         struct ompi_op_t *op, int root, struct ompi_communicator_t *comm,
                         ompi_request_t **request, mca_coll_base_module_t *module);
int mca_coll_gpu_ireduce_scatter_block(const void *sbuf, void *rbuf, int rcount,
                                       struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                       struct ompi_communicator_t *comm, ompi_request_t **request,
                                       mca_coll_base_module_t *module);
int mca_coll_gpu_ireduce_scatter(const void *sbuf, void *rbuf, const int *rcounts,
                                 struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                 struct ompi_communicator_t *comm, ompi_request_t **request,
                                 mca_coll_base_module_t *module);
int mca_coll_gpu_iscan(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dtype,
                       struct ompi_op_t *op, struct ompi_communicator_t *comm,
                       ompi_request_t **request, mca_coll_base_module_t *module);
int mca_coll_gpu_iexscan(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dtype,
                         struct ompi_op_t *op, struct ompi_communicator_t *comm,
                         ompi_request_t **request, mca_coll_base_module_t *module);
int mca_coll_gpu_reduce_init(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dt,
                             struct ompi_op_t *op, int root, struct ompi_communicator_t *comm,
                             struct ompi_info_t *info, ompi_request_t **request,
                             mca_coll_base_module_t *module);
int mca_coll_gpu_reduce_scatter_block_init(const void *sbuf, void *rbuf, int count,
                                           struct ompi_datatype_t *dt, struct ompi_op_t *op,
                                           struct ompi_communicator_t *comm,
                                           struct ompi_info_t *info, ompi_request_t **request,
                                           mca_coll_base_module_t *module);
int mca_coll_gpu_reduce_scatter_init(const void *sbuf, void *rbuf, const int *rcounts,
                                     struct ompi_datatype_t *dt, struct ompi_op_t *op,
                                     struct ompi_communicator_t *comm, struct ompi_info_t *info,
                                     ompi_request_t **request, mca_coll_base_module_t *module);
int mca_coll_gpu_scan_init(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dt,
                           struct ompi_op_t *op, struct ompi_communicator_t *comm,
                           struct ompi_info_t *info, ompi_request_t **request,
                           mca_coll_base_module_t *module);
int mca_coll_gpu_exscan_init(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dt,
                             struct ompi_op_t *op, struct ompi_communicator_t *comm,
                             struct ompi_info_t *info, ompi_request_t **request,
                             mca_coll_base_module_t *module);

/* ---- neighborhood collectives, staged (coll_gpu_neighbor.c) ---- */

/* blocking and non-blocking, on any communicator with a topology */
void mca_coll_gpu_neighbor_install(mca_coll_gpu_module_t *m);
int mca_coll_gpu_neighbor_allgather_init(const void *sbuf, int scount, struct ompi_datatype_t *sdt,
                                         void *rbuf, int rcount, struct ompi_datatype_t *rdt,
                                         struct ompi_communicator_t *comm, struct ompi_info_t *info,
                                         ompi_request_t **request, mca_coll_base_module_t *module);
int mca_coll_gpu_neighbor_allgatherv_init(const void *sbuf, int scount, struct ompi_datatype_t *sdt,
                                          void *rbuf, const int *rcounts, const int *displs,
                                          struct ompi_datatype_t *rdt,
                                          struct ompi_communicator_t *comm,
                                          struct ompi_info_t *info, ompi_request_t **request,
                                          mca_coll_base_module_t *module);
int mca_coll_gpu_neighbor_alltoall_init(const void *sbuf, int scount, struct ompi_datatype_t *sdt,
                                        void *rbuf, int rcount, struct ompi_datatype_t *rdt,
                                        struct ompi_communicator_t *comm, struct ompi_info_t *info,
                                        ompi_request_t **request, mca_coll_base_module_t *module);
int mca_coll_gpu_neighbor_alltoallv_init(const void *sbuf, const int *scounts, const int *sdispls,
                                         struct ompi_datatype_t *sdt, void *rbuf,
                                         const int *rcounts, const int *rdispls,
                                         struct ompi_datatype_t *rdt,
                                         struct ompi_communicator_t *comm, struct ompi_info_t *info,
                                         ompi_request_t **request, mca_coll_base_module_t *module);
int mca_coll_gpu_neighbor_alltoallw_init(const void *sbuf, const int *scounts,
                                         const MPI_Aint *sdispls,
                                         struct ompi_datatype_t *const *sdts, void *rbuf,
                                         const int *rcounts, const MPI_Aint *rdispls,
                                         struct ompi_datatype_t *const *rdts,
                                         struct ompi_communicator_t *comm, struct ompi_info_t *info,
                                         ompi_request_t **request, mca_coll_base_module_t *module);

/* ---- whole communicators of other kinds ---- */

/* intercommunicators: every collective with a buffer staged (coll_gpu_inter.c) */
void mca_coll_gpu_inter_install(mca_coll_gpu_module_t *m);
/* communicators of one rank: local copies (coll_gpu_self.c) */
void mca_coll_gpu_self_install(mca_coll_gpu_module_t *m);

END_C_DECLS

#endif /* MCA_COLL_GPU_ENTRY_H */
