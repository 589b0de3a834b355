/*
 * coll/gpu engine, communicators across nodes: the steps between nodes.
 *
 * The point-to-point patterns the collectives of net_coll.c are built from, each over the
 * proxy with the tags of its phases: the ring allreduce (host memory directly, device
 * memory pipelined through a stager's pinned slots), the binomial broadcast among one rank
 * per node, and the waits, bounded by coll_gpu_ras_timeout and the watchdog's abort. A step
 * a rank cannot do properly (no memory) it still takes part in, on zeros, so that no peer
 * waits for it forever.
 *
 * A wait that gives up records the peer it waited for (what the error names). That peer may
 * be alive and only out of the collective because a rank of its node died, which only its
 * node can see: so a rank that saw a node-mate die sends a failure notice naming it to its
 * partners on other nodes, and a wait that gives up on a peer looks for that peer's notice
 * (briefly: one sent is already here) before naming the peer itself.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cgpu_cuda.h"
#include "net_internal.h"

static double wait_limit(void)
{
    return cgpu_engine_config()->ras_timeout_s;
}

/* How long a look for a failure notice waits: one sent lies in this process's provider
 * already (its sender found the death before this rank's wait on it gave up) */
#define NOTICE_LOOK_S 0.1

/* The rank that peer @p p's failure notice names, or -1 when it sent none. */
static int notice_from(cgpu_comm_t *comm, int p)
{
    /* on the heap, and left there when the receive does not end cleanly: a receive the
     * provider could not cancel may still write them */
    struct {
        cgpu_proxy_req_t req;
        int32_t dead;
    } *look = calloc(1, sizeof(*look));
    if (NULL == look) {
        return -1;
    }
    look->dead = -1;
    if (CGPU_OK != cgpu_proxy_irecv(comm->net->group, p, &look->dead, sizeof(look->dead),
                                    cgpu_net_notice_tag(comm->net), &look->req)) {
        free(look);
        return -1;
    }
    if (CGPU_OK != cgpu_proxy_waitall_quiet(&look->req, 1, NOTICE_LOOK_S)) {
        return -1;
    }
    const int dead = look->dead;
    free(look);
    return dead >= 0 && dead < comm->size ? dead : -1;
}

cgpu_status_t cgpu_net_wait(cgpu_comm_t *comm, cgpu_proxy_req_t *reqs, int n)
{
    if (0 == n) {
        return CGPU_OK;
    }
    cgpu_status_t st = cgpu_proxy_waitall(reqs, n, wait_limit(), &comm->ras.abort);
    cgpu_ras_progress(comm);
    /* past the timeout, or the connection lost: the peer of the first request that did not
     * complete is the one the error names (group ranks are this communicator's), or the
     * death it told of */
    const bool silent = CGPU_ERR_TIMEOUT == st || CGPU_ERR_PEER == st;
    for (int i = 0; silent && 0 == atomic_load(&comm->unanswered) && i < n; ++i) {
        if (CGPU_OK != cgpu_proxy_test(&reqs[i])) {
            /* (a death seen on this node names itself: no look) */
            const int dead =
                cgpu_comm_dead_peer(comm, NULL) < 0 ? notice_from(comm, reqs[i].peer) : -1;
            if (dead >= 0) {
                cgpu_log(CGPU_LOG_INFO,
                         "net: rank %d of %s, which did not answer, had told that its node's "
                         "rank %d died",
                         reqs[i].peer, comm->ras.name, dead);
            }
            cgpu_comm_note_unanswered(comm, dead >= 0 ? dead : reqs[i].peer);
            break;
        }
    }
    return st;
}

/* Adds @p r to the @p n ranks of @p to unless there, or this rank, or on this node. */
static int add_partner(const cgpu_comm_t *comm, int *to, int n, int r)
{
    if (r < 0 || r == comm->rank || comm->net->node_of[r] == comm->net->node) {
        return n;
    }
    for (int i = 0; i < n; ++i) {
        if (to[i] == r) {
            return n;
        }
    }
    to[n] = r;
    return n + 1;
}

void cgpu_net_notice_send(cgpu_comm_t *comm, int dead)
{
    cgpu_net_t *net = comm->net;
    const int most = 2 * net->nnodes + net->npartners;
    int *to = malloc(sizeof(int) * (size_t) most);
    /* the message and its requests stay on the heap where a send does not end cleanly (the
     * provider may still read them) */
    int32_t *msg = malloc(sizeof(int32_t));
    cgpu_proxy_req_t *reqs = calloc((size_t) most, sizeof(*reqs));
    if (NULL == to || NULL == msg || NULL == reqs) {
        free(to);
        free(msg);
        free(reqs);
        return;
    }
    *msg = dead;
    int n = 0;
    for (int k = 0; k < net->nnodes; ++k) { /* the rings' partners */
        n = add_partner(comm, to, n, net->ppn > 1 ? net->rail[k] : -1);
        n = add_partner(comm, to, n, 0 == net->local_index ? net->firsts[k] : -1);
    }
    for (int i = 0; i < net->npartners; ++i) { /* the call check's */
        n = add_partner(comm, to, n, net->partners[i]);
    }
    int posted = 0;
    for (int i = 0; i < n; ++i) {
        posted += CGPU_OK == cgpu_proxy_isend(net->group, to[i], msg, sizeof(*msg),
                                              cgpu_net_notice_tag(net), &reqs[posted]);
    }
    cgpu_log(CGPU_LOG_INFO, "net: told %d rank(s) on other nodes that rank %d died", posted, dead);
    /* a partner that is alive takes it at once (its provider keeps it until asked) */
    if (CGPU_OK == cgpu_proxy_waitall_quiet(reqs, posted, 0.5)) {
        free(msg);
        free(reqs);
    }
    free(to);
}

static bool on_device(const void *p)
{
    int dev;
    return NULL != p && CGPU_BUF_HOST != cgpu_buf_kind(p, &dev);
}

/*
 * Ring allreduce (reduce-scatter, then allgather) of host memory among @p members (ranks,
 * ring order), this rank being members[me], under the tags of phase @p ph. @p tmp holds
 * count / nm + 1 elements (the segment received at each step).
 */
static cgpu_status_t ring_allreduce_host(cgpu_comm_t *comm, const int *members, int nm, int me,
                                         char *buf, size_t count, cgpu_dtype_t dt, cgpu_op_t op,
                                         uint32_t ph, char *tmp)
{
    cgpu_net_t *net = comm->net;
    const size_t es = cgpu_dtype_size(dt);
    const int right = members[(me + 1) % nm], left = members[(me + nm - 1) % nm];
#define SEG_LO(i) (count * (size_t) (i) / (size_t) nm)
#define SEG_N(i) (SEG_LO((i) + 1) - SEG_LO(i))
    cgpu_status_t st = CGPU_OK;
    for (int s = 0; s < 2 * (nm - 1) && CGPU_OK == st; ++s) {
        const bool rs = s < nm - 1;
        const int k = rs ? s : s - (nm - 1);
        const int send_i = rs ? (me - k + nm) % nm : (me + 1 - k + nm) % nm;
        const int recv_i = rs ? (me - k - 1 + 2 * nm) % nm : (me - k + nm) % nm;
        cgpu_proxy_req_t req[2];
        int n = 0;
        st = cgpu_proxy_irecv(net->group, left, rs ? tmp : buf + SEG_LO(recv_i) * es,
                              SEG_N(recv_i) * es, ph | (uint32_t) (s & 0xfff), &req[n]);
        n += CGPU_OK == st;
        if (CGPU_OK == st) {
            st = cgpu_proxy_isend(net->group, right, buf + SEG_LO(send_i) * es, SEG_N(send_i) * es,
                                  ph | (uint32_t) (s & 0xfff), &req[n]);
            n += CGPU_OK == st;
        }
        cgpu_status_t w = cgpu_net_wait(comm, req, n);
        st = CGPU_OK != st ? st : w;
        if (CGPU_OK == st && rs && SEG_N(recv_i) > 0) {
            char *d = buf + SEG_LO(recv_i) * es;
            if (0 != cgpu_reduce_host(dt, op, d, d, tmp, SEG_N(recv_i))) {
                st = CGPU_ERR_INVALID_ARG;
            }
        }
    }
#undef SEG_LO
#undef SEG_N
    return st;
}

/* A phase failed in a way that leaves the communicator unusable (a peer did not answer
 * within coll_gpu_ras_timeout, the watchdog aborted, or a rank of this node died): the other
 * phases are skipped, since their peers fail the same way. Other failures (no memory) still
 * take part. */
bool cgpu_net_fatal(const cgpu_comm_t *comm, cgpu_status_t st)
{
    /* a mismatch: the ranks' plans of the later phases may differ as their arguments do; a
     * death: what this rank holds lacks the dead rank's part, and handed on it would make a
     * wrong result that the ranks of other nodes return as a success (their partners tell
     * them instead: cgpu_net_notice_send) */
    return CGPU_ERR_TIMEOUT == st || CGPU_ERR_PEER == st || CGPU_ERR_STATE == st ||
           CGPU_ERR_MISMATCH == st || CGPU_ERR_PEER_DEAD == st ||
           0 != atomic_load_explicit(&comm->ras.abort, memory_order_relaxed);
}

/* Memory the inter-node reduction must stage through host slots (device memory; host
 * memory too under the test switch coll_gpu_stage_host_buffers). */
static bool staged(const void *p)
{
    return on_device(p) || cgpu_engine_config()->stage_host_buffers;
}

/*
 * ring_allreduce_host on memory of any kind, in pieces of coll_gpu_proxy_bounce_bytes (the
 * same cut on every rank, whatever its memory, so every rank draws as many phases). Device
 * memory is pipelined through three pinned slots of a stager: piece i+1 is copied in and
 * piece i-1 copied back while the ring works on piece i.
 */
cgpu_status_t cgpu_net_ring_allreduce_any(cgpu_comm_t *comm, const int *members, int nm, int me,
                                          void *buf, size_t count, cgpu_dtype_t dt, cgpu_op_t op)
{
    cgpu_net_t *net = comm->net;
    const size_t es = cgpu_dtype_size(dt);
    size_t pe = cgpu_engine_config()->proxy_bounce_bytes / es;
    pe = pe > 0 ? pe : 1;
    const size_t npieces = 0 == count ? 0 : (count + pe - 1) / pe;
    const uint32_t ph0 = net->phase;
    net->phase += (uint32_t) npieces; /* every rank, member or not */
#define PIECE_PH(i) cgpu_net_phase_tag(net, ph0 + (uint32_t) (i))
    if (me < 0 || nm < 2 || 0 == count) {
        return CGPU_OK;
    }
    char *b = buf;
    cgpu_status_t st = CGPU_OK;
    cgpu_stager_t *sg = NULL;
    if (staged(buf) && CGPU_OK != cgpu_stager_get(pe * es, 3, &sg)) {
        sg = NULL; /* no slots: take part on zeros so no peer waits, and report */
        st = CGPU_ERR_NO_MEMORY;
    }
    char *zeros = NULL;
    if (staged(buf) && NULL == sg) {
        zeros = calloc(pe, es);
    }
    /* the segment received at each step of any piece */
    char *tmp = malloc(((pe < count ? pe : count) / (size_t) nm + 1) * es);
    if (NULL == tmp || (staged(buf) && NULL == sg && NULL == zeros)) {
        free(zeros); /* peers time out: nothing else is possible without memory */
        free(tmp);
        cgpu_stager_put(&sg);
        return CGPU_ERR_NO_MEMORY;
    }
#define PIECE_N(i) ((i) + 1 < npieces ? pe : count - (i) *pe)
    if (NULL != sg) {
        st = cgpu_stager_copy(sg, cgpu_stager_slot(sg, 0), b, PIECE_N(0) * es);
        st = CGPU_OK == st ? cgpu_stager_mark(sg, 0) : st;
    }
    for (size_t i = 0; i < npieces && !cgpu_net_fatal(comm, st); ++i) {
        const size_t n = PIECE_N(i);
        char *work = b + i * pe * es;
        if (NULL != sg) {
            const int k = (int) (i % 3), k1 = (int) ((i + 1) % 3);
            if (CGPU_OK == st && i + 1 < npieces) { /* in order after piece i-2's copy back */
                st = cgpu_stager_copy(sg, cgpu_stager_slot(sg, k1), b + (i + 1) * pe * es,
                                      PIECE_N(i + 1) * es);
                st = CGPU_OK == st ? cgpu_stager_mark(sg, k1) : st;
            }
            if (CGPU_OK == st) {
                st = cgpu_stager_wait(sg, k); /* piece i is in its slot */
            }
            work = cgpu_stager_slot(sg, k);
        } else if (NULL != zeros) {
            memset(zeros, 0, n * es);
            work = zeros;
        }
        cgpu_status_t rs =
            ring_allreduce_host(comm, members, nm, me, work, n, dt, op, PIECE_PH(i), tmp);
        st = CGPU_OK != st ? st : rs;
        if (NULL != sg && CGPU_OK == st) {
            st = cgpu_stager_copy(sg, b + i * pe * es, work, n * es);
            st = CGPU_OK == st ? cgpu_stager_mark(sg, (int) (i % 3)) : st;
        }
    }
    if (NULL != sg) {
        cgpu_status_t f = cgpu_stager_finish(sg);
        st = CGPU_OK != st ? st : f;
        cgpu_stager_put(&sg);
    }
    free(zeros);
    free(tmp);
#undef PIECE_N
#undef PIECE_PH
    return st;
}

/*
 * The proxy reads device memory with its own copies (or the NIC does, with FI_HMEM): what
 * the caller queued on the default stream (and the blocking streams) that writes a buffer
 * must be done first. On a failure the rank still takes part (its peers would wait).
 */
cgpu_status_t cgpu_net_after_default_stream(cgpu_net_t *net, const void *a, const void *b)
{
    if (!on_device(a) && !on_device(b)) {
        return CGPU_OK;
    }
    cgpu_status_t st = NULL == net->order_ev ? cgpu_cuda_event_create(&net->order_ev) : CGPU_OK;
    return CGPU_OK == st ? cgpu_cuda_default_stream_wait_host(net->order_ev) : st;
}

/* Member @p v of the broadcast tree between nodes: the root, then the first rank of every
 * other node in node order from the root's node @p rn. */
static int tree_member(const cgpu_net_t *net, int root, int rn, int v)
{
    return 0 == v ? root : net->firsts[(rn + v) % net->nnodes];
}

/* Binomial broadcast among the tree's members (member 0, the root, is the source), of any
 * memory. */
cgpu_status_t cgpu_net_tree_bcast(cgpu_comm_t *comm, int root, int rn, int me, void *buf,
                                  size_t bytes)
{
    const int nm = comm->net->nnodes;
    const uint32_t ph = cgpu_net_next_phase(comm->net);
    if (me < 0 || nm < 2 || 0 == bytes) {
        return CGPU_OK;
    }
    cgpu_net_t *net = comm->net;
    cgpu_status_t st = CGPU_OK;
    int mask = 1;
    while (mask < nm) {
        if (me & mask) {
            cgpu_proxy_req_t req;
            st = cgpu_proxy_irecv(net->group, tree_member(net, root, rn, me - mask), buf, bytes, ph,
                                  &req);
            if (CGPU_OK == st) {
                st = cgpu_net_wait(comm, &req, 1);
            }
            break;
        }
        mask <<= 1;
    }
    cgpu_proxy_req_t reqs[32];
    int n = 0;
    for (mask >>= 1; mask > 0 && CGPU_OK == st; mask >>= 1) {
        if (me + mask < nm) {
            st = cgpu_proxy_isend(net->group, tree_member(net, root, rn, me + mask), buf, bytes, ph,
                                  &reqs[n]);
            n += CGPU_OK == st;
        }
    }
    cgpu_status_t w = cgpu_net_wait(comm, reqs, n);
    return CGPU_OK != st ? st : w;
}
