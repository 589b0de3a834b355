/*
 * coll/gpu engine: the call check. Before a collective moves any data, every rank writes
 * what it is calling (a signature: kind, bytes, element type and op of reductions, root)
 * beside the counter that says which call it entered, waits until every peer has entered the
 * same call, and compares all the records.
 *
 * Why every rank reads every record, instead of each checking only the peers whose data it
 * consumes: a rank that consumes nothing (a broadcast's root, a rank whose count is zero)
 * would return success from a call its peers fail, and two ranks that both think they are
 * the root would both send and neither receive, with nobody to notice; the next call would
 * then read the stale data. With every record read, every rank reaches the same verdict
 * from the same records, before any queue or counter of the data path has moved, so a
 * mismatch fails the call on every rank and leaves the communicator as it was: a later
 * call that matches runs as usual (no sticky failure is needed). The price is that no rank
 * starts a collective before all have entered it, which the ring algorithms need anyway
 * for all but their first send (bench/ measures it); coll_gpu_check_calls turns it off.
 */
#include <stdio.h>

#include "cgpu_conn.h"

static const char *const call_names[CGPU_CALL_KINDS] = {
    [CGPU_CALL_ALLREDUCE] = "allreduce",
    [CGPU_CALL_ALLTOALL] = "alltoall",
    [CGPU_CALL_BCAST] = "bcast",
    [CGPU_CALL_ALLGATHER] = "allgather",
    [CGPU_CALL_REDUCE_SCATTER] = "reduce_scatter_block",
    [CGPU_CALL_REDUCE] = "reduce",
    [CGPU_CALL_SCAN] = "scan",
    [CGPU_CALL_EXSCAN] = "exscan",
};

static const char *call_name(uint64_t k)
{
    return k > 0 && k < CGPU_CALL_KINDS ? call_names[k] : "(unknown call)";
}

/* w[1]: kind in bits 0-7, op in 8-15, dt in 16-23, host in 24, root + 1 in 32-63 */
static void pack(const cgpu_sig_t *sig, uint64_t w[2])
{
    w[0] = sig->bytes;
    w[1] = (uint64_t) (sig->kind & 0xff) | (uint64_t) (sig->op & 0xff) << 8 |
           (uint64_t) (sig->dt & 0xff) << 16 | (uint64_t) (sig->host ? 1 : 0) << 24 |
           (uint64_t) (uint32_t) (sig->root + 1) << 32;
}

static cgpu_sig_t unpack(const uint64_t w[2])
{
    return (cgpu_sig_t){.bytes = w[0],
                        .kind = (int) (w[1] & 0xff),
                        .op = (int) ((w[1] >> 8) & 0xff),
                        .dt = (int) ((w[1] >> 16) & 0xff),
                        .host = 0 != ((w[1] >> 24) & 1),
                        .root = (int) (uint32_t) (w[1] >> 32) - 1};
}

void cgpu_call_publish(cgpu_comm_t *comm, uint64_t s, const cgpu_sig_t *sig)
{
    cgpu_call_line_t *line = &cgpu_ctrl(comm, comm->rank)->call;
    line->rec[s & 1].seq = s;
    pack(sig, line->rec[s & 1].w);
    /* the record is published by the release of entered (peers read it after acquiring) */
    atomic_store_explicit(&line->entered, s, memory_order_release);
}

/* "N bytes (k x float64)" for a size: the element count too where the type is known */
static void say_bytes(char *buf, size_t n, const cgpu_sig_t *g)
{
    const size_t es = CGPU_SIG_NONE != g->dt ? cgpu_dtype_size((cgpu_dtype_t) g->dt) : 0;
    if (es > 0) {
        snprintf(buf, n, "%llu bytes (%llu x %s)", (unsigned long long) g->bytes,
                 (unsigned long long) (g->bytes / es), cgpu_dtype_name((cgpu_dtype_t) g->dt));
    } else {
        snprintf(buf, n, "%llu bytes", (unsigned long long) g->bytes);
    }
}

cgpu_mismatch_field_t cgpu_call_compare(const cgpu_sig_t *a, const cgpu_sig_t *b, int ra, int rb,
                                        cgpu_mismatch_t *m)
{
    char sa[64], sb[64];
    m->rank_a = ra;
    m->rank_b = rb;
    if (a->kind != b->kind) {
        m->a = (uint64_t) a->kind;
        m->b = (uint64_t) b->kind;
        snprintf(m->text, sizeof(m->text), "rank %d calls %s, rank %d calls %s", ra,
                 call_name(m->a), rb, call_name(m->b));
        return m->field = CGPU_MISMATCH_CALL;
    }
    if (a->root != b->root) {
        m->a = (uint64_t) (int64_t) a->root;
        m->b = (uint64_t) (int64_t) b->root;
        snprintf(m->text, sizeof(m->text), "rank %d names root %d, rank %d names root %d", ra,
                 a->root, rb, b->root);
        return m->field = CGPU_MISMATCH_ROOT;
    }
    if (a->op != b->op) {
        m->a = (uint64_t) a->op;
        m->b = (uint64_t) b->op;
        snprintf(m->text, sizeof(m->text), "rank %d reduces with %s, rank %d with %s", ra,
                 cgpu_op_name((cgpu_op_t) a->op), rb, cgpu_op_name((cgpu_op_t) b->op));
        return m->field = CGPU_MISMATCH_OP;
    }
    if (a->dt != b->dt) {
        m->a = (uint64_t) a->dt;
        m->b = (uint64_t) b->dt;
        snprintf(m->text, sizeof(m->text), "rank %d reduces %s elements, rank %d %s elements", ra,
                 cgpu_dtype_name((cgpu_dtype_t) a->dt), rb, cgpu_dtype_name((cgpu_dtype_t) b->dt));
        return m->field = CGPU_MISMATCH_DTYPE;
    }
    if (a->bytes != b->bytes) {
        m->a = a->bytes;
        m->b = b->bytes;
        say_bytes(sa, sizeof(sa), a);
        say_bytes(sb, sizeof(sb), b);
        snprintf(m->text, sizeof(m->text), "rank %d passes %s, rank %d passes %s", ra, sa, rb, sb);
        return m->field = CGPU_MISMATCH_SIZE;
    }
    return m->field = CGPU_MISMATCH_NONE;
}

/* the rank of @p comm the reports name (node-local communicators: the rank across nodes) */
static int report_rank(const cgpu_comm_t *comm, int r)
{
    return NULL != comm->report_ranks ? comm->report_ranks[r] : r;
}

cgpu_status_t cgpu_call_check(cgpu_comm_t *comm, uint64_t s)
{
    const int n = comm->size;
    for (int p = 0; p < n; ++p) {
        if (p != comm->rank && !cgpu_wait_ge(comm, &cgpu_ctrl(comm, p)->call.entered, s, p)) {
            return cgpu_comm_wait_failed(comm);
        }
    }
    /* every rank compares every record with rank 0's, so every rank names the same pair */
    const cgpu_call_line_t *l0 = &cgpu_ctrl(comm, 0)->call;
    const cgpu_sig_t ref = unpack(l0->rec[s & 1].w);
    bool stale = l0->rec[s & 1].seq != s;
    bool all_host = ref.host;
    for (int p = 1; p < n && !stale; ++p) {
        const cgpu_call_line_t *lp = &cgpu_ctrl(comm, p)->call;
        if (lp->rec[s & 1].seq != s) {
            stale = true;
            break;
        }
        const cgpu_sig_t g = unpack(lp->rec[s & 1].w);
        all_host = all_host && g.host;
        cgpu_mismatch_t m;
        if (CGPU_MISMATCH_NONE !=
            cgpu_call_compare(&ref, &g, report_rank(comm, 0), report_rank(comm, p), &m)) {
            comm->mismatch = m;
            cgpu_log(CGPU_LOG_INFO, "engine: call %llu on communicator %s does not match: %s",
                     (unsigned long long) s, comm->ras.name, m.text);
            return CGPU_ERR_MISMATCH;
        }
    }
    comm->call_all_host = all_host && !stale;
    if (stale) {
        /* cannot happen while every rank checks (see cgpu_call_line_t); were it to, the call
         * runs unchecked rather than failing ranks that may well agree */
        cgpu_log(CGPU_LOG_INFO,
                 "engine: call %llu on communicator %s: a record was overwritten; "
                 "not checked",
                 (unsigned long long) s, comm->ras.name);
    }
    return CGPU_OK;
}

bool cgpu_comm_mismatch(const cgpu_comm_t *comm, cgpu_mismatch_t *out)
{
    if (NULL == comm) {
        return false;
    }
    const cgpu_comm_t *c = comm;
    if (CGPU_MISMATCH_NONE == c->mismatch.field) {
        return false;
    }
    if (NULL != out) {
        *out = c->mismatch;
    }
    return true;
}
