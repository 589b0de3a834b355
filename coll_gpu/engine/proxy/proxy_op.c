/*
 * coll/gpu engine, inter-node proxy: an operation on the wire (progress thread only).
 *
 * A started request becomes an operation: its message is cut into chunks of
 * cgpu_proxy_chunk_bytes() (both sides cut alike from the byte count alone), each chunk a
 * tagged libfabric send or receive of its own. An operation moves at most two chunks at once
 * through its two slots, so a staged one copies a chunk into (or out of) one bounce buffer
 * while the other is on the wire. This file holds the tag layout, the chunk and slot state
 * machine (cgpu_proxy_op_advance), the completions that drive it (cgpu_proxy_poll), and the
 * cancel of an operation, abandoned when the provider does not honour it in time.
 */
#include "cgpu_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cgpu_cuda.h"
#include "proxy_internal.h"

enum {
    PROXY_POLL_BATCH = 16, /* completions read at once */
};

/*
 * The libfabric tag of chunk @p chunk. Layouts (most significant bits first):
 *   directed receive:    chunk:12 | context id:20 | tag:32
 *   no directed receive: chunk:12 | context id:12 | source rank:16 | tag:24
 * The chunk number makes every chunk of a message a distinct message, so chunks match
 * without relying on the provider's ordering. It wraps after 4096 chunks (16 GiB with the
 * default 4 MiB bounce buffers): a sender whose chunk sends complete before the receiver
 * matches them (buffered by the provider) would have to run 4096 chunks ahead for a chunk
 * to meet a later one's receive. A narrower field is not enough: a provider that buffers
 * small messages eagerly (shm with FI_HMEM) lets a sender of 60000-byte chunks run hundreds
 * of chunks ahead, and with 8 bits chunk 257 lands in chunk 1's receive.
 */
#define PROXY_CHUNK_SHIFT 52
#define PROXY_CHUNK_MASK 0xfffu

static uint64_t tag_of(const proxy_op_t *op, uint32_t chunk)
{
    return op->tag_base | ((uint64_t) (chunk & PROXY_CHUNK_MASK) << PROXY_CHUNK_SHIFT);
}

/* The operation no longer counts against its group (it ended, or was abandoned: its group
 * may be gone before the provider gives the slot back). */
static void op_uncount(proxy_op_t *op)
{
    if (op->counted) {
        op->counted = false;
        op->group->active[op->kind & PROXY_KIND_MASK]--;
    }
}

void cgpu_proxy_op_release(proxy_op_t *op)
{
    const int k = op->kind & PROXY_KIND_MASK;
    cgpu_ofi_dereg(op->mr);
    if (NULL != op->pair && op->pair->temp_bytes > 0) {
        cgpu_proxy_pair_temp_free(op->pair);
    } else if (NULL != op->pair) {
        op->pair->busy = false;
    }
    op_uncount(op);
    cgpu_proxy.active[k]--;
    memset(op, 0, sizeof(*op));
}

static void op_finish(proxy_op_t *op)
{
    if (NULL != op->req) {
        cgpu_proxy_req_end(op->req, op->status);
    }
    cgpu_proxy_op_release(op);
}

/* Fail (or cancel) @p op: no new chunk starts and posted ones are cancelled. */
void cgpu_proxy_op_cancel(proxy_op_t *op, cgpu_status_t st)
{
    const int k = op->kind & PROXY_KIND_MASK;
    if (CGPU_OK == op->status) {
        op->status = st;
    }
    if (op->cancelling) {
        return;
    }
    op->cancelling = true;
    op->cancel_ns = cgpu_proxy_now_ns();
    for (int s = 0; s < op->nslots; ++s) {
        proxy_slot_t *sl = &op->slot[s];
        if (SLOT_POSTED == sl->state) {
            cgpu_ofi_cancel(cgpu_proxy.ofi, sl->ctx);
        } else if (SLOT_READY == sl->state) {
            sl->state = SLOT_FREE;
            op->busy--;
            cgpu_proxy.busy[k]--;
        }
    }
}

static void op_error(proxy_op_t *op, cgpu_status_t st, const char *what)
{
    if (NULL != op->req && CGPU_OK == op->status) {
        cgpu_log(CGPU_LOG_WARN, "proxy: %s of %zu bytes %s rank %d of group %u failed: %s",
                 cgpu_proxy_kind_name(op->kind), op->bytes, cgpu_proxy_kind_dir(op->kind), op->peer,
                 op->group->context_id, what);
    }
    cgpu_proxy_op_cancel(op, st);
}

/* Start a staging copy of slot @p s (send: user -> bounce; receive: bounce -> user). */
static cgpu_status_t slot_copy(proxy_op_t *op, int s)
{
    proxy_slot_t *sl = &op->slot[s];
    const int k = op->kind & PROXY_KIND_MASK;
    char *user = op->buf + sl->off;
    void *bounce = op->pair->buf[s];
    void *dst = PROXY_KIND_SEND == k ? bounce : (void *) user;
    const void *src = PROXY_KIND_SEND == k ? (const void *) user : bounce;

    if (0 == (op->kind & PROXY_CUDA_COPY) || NULL == op->pair->ev[s]) {
        memcpy(dst, src, sl->len);
        return CGPU_OK;
    }
    cgpu_status_t st = cgpu_cuda_copy_async(dst, src, sl->len, cgpu_proxy.stream[k]);
    if (CGPU_OK == st) {
        st = cgpu_cuda_event_record(op->pair->ev[s], cgpu_proxy.stream[k]);
    }
    return CGPU_OK == st ? CGPU_IN_PROGRESS : st;
}

static void slot_done(proxy_op_t *op, proxy_slot_t *sl)
{
    sl->state = SLOT_FREE;
    op->busy--;
    cgpu_proxy.busy[op->kind & PROXY_KIND_MASK]--;
    op->done++;
}

/* Move @p op as far as it goes now; returns true if anything changed. Finishes it. */
bool cgpu_proxy_op_advance(proxy_op_t *op)
{
    const int k = op->kind & PROXY_KIND_MASK;
    const bool staged = 0 != (op->kind & PROXY_STAGED);
    bool did = false;

    /* staging copies that ended */
    for (int s = 0; s < op->nslots; ++s) {
        proxy_slot_t *sl = &op->slot[s];
        if (SLOT_COPYING != sl->state) {
            continue;
        }
        cgpu_status_t q = cgpu_cuda_event_query(op->pair->ev[s]);
        if (CGPU_IN_PROGRESS == q) {
            continue;
        }
        did = true;
        if (CGPU_OK != q) {
            sl->state = SLOT_FREE;
            op->busy--;
            cgpu_proxy.busy[k]--;
            op_error(op, q, "staging copy failed");
        } else if (PROXY_KIND_SEND == k) {
            sl->state = SLOT_READY;
        } else {
            slot_done(op, sl);
        }
    }
    /* start chunks in free slots */
    for (int s = 0; s < op->nslots && !op->cancelling; ++s) {
        proxy_slot_t *sl = &op->slot[s];
        /* past the window its group's only operation of the direction still moves, one
         * chunk at a time (see "Bounds" in proxy_sched.c) */
        if (SLOT_FREE != sl->state || op->next >= op->nchunks ||
            (cgpu_proxy.busy[k] >= cgpu_proxy.cap[k] &&
             (op->busy > 0 || !op->counted || 1 != op->group->active[k]))) {
            continue;
        }
        did = true;
        sl->chunk = op->next++;
        sl->off = (size_t) sl->chunk * cgpu_proxy.chunk;
        sl->len = op->bytes - sl->off < cgpu_proxy.chunk ? op->bytes - sl->off : cgpu_proxy.chunk;
        sl->state = SLOT_READY;
        op->busy++;
        cgpu_proxy.busy[k]++;
        if (PROXY_KIND_SEND == k && staged) {
            cgpu_status_t st = slot_copy(op, s);
            if (CGPU_IN_PROGRESS == st) {
                sl->state = SLOT_COPYING;
            } else if (CGPU_OK != st) {
                sl->state = SLOT_FREE;
                op->busy--;
                cgpu_proxy.busy[k]--;
                op_error(op, st, "staging copy failed");
            }
        }
    }
    /* post what is ready */
    for (int s = 0; s < op->nslots && !op->cancelling; ++s) {
        proxy_slot_t *sl = &op->slot[s];
        if (SLOT_READY != sl->state) {
            continue;
        }
        void *b = staged ? op->pair->buf[s] : (void *) (op->buf + sl->off);
        cgpu_status_t st;
        if (PROXY_KIND_SEND == k) {
            st = cgpu_ofi_tsend(cgpu_proxy.ofi, b, sl->len, op->desc, op->addr,
                                tag_of(op, sl->chunk), sl->ctx);
        } else {
            st = cgpu_ofi_trecv(cgpu_proxy.ofi, b, sl->len, op->desc,
                                cgpu_proxy.directed ? op->addr : CGPU_OFI_ADDR_ANY,
                                tag_of(op, sl->chunk), sl->ctx);
        }
        if (CGPU_IN_PROGRESS == st) {
            break; /* provider full: completions first, then again (the next pass) */
        }
        did = true;
        if (CGPU_OK == st) {
            sl->state = SLOT_POSTED;
        } else {
            sl->state = SLOT_FREE;
            op->busy--;
            cgpu_proxy.busy[k]--;
            op_error(op, st, "the provider refused the operation");
        }
    }
    /* a cancel the provider does not honour in time: give the request back anyway */
    if (op->cancelling && NULL != op->req && op->busy > 0 &&
        cgpu_proxy_now_ns() - op->cancel_ns > cgpu_proxy_cancel_grace_ns) {
        cgpu_log(CGPU_LOG_WARN,
                 "proxy: %s of %zu bytes %s rank %d of group %u could not be cancelled within "
                 "%.2f s; it is abandoned (the provider may still use its buffer until the proxy "
                 "stops)",
                 cgpu_proxy_kind_name(op->kind), op->bytes, cgpu_proxy_kind_dir(op->kind), op->peer,
                 op->group->context_id, (double) cgpu_proxy_cancel_grace_ns / 1e9);
        op_uncount(op);
        cgpu_proxy_req_end(op->req, op->status);
        op->req = NULL;
        did = true;
    }
    if (0 == op->busy && (op->cancelling || op->done == op->nchunks)) {
        op_finish(op);
        did = true;
    }
    return did;
}

static void op_completion(const cgpu_ofi_cqe_t *e)
{
    proxy_slot_t *sl = (proxy_slot_t *) e->ctx;
    proxy_op_t *op = sl->op;
    const int k = op->kind & PROXY_KIND_MASK;

    if (SLOT_POSTED != sl->state) {
        cgpu_log(CGPU_LOG_WARN, "proxy: completion for an operation not posted (ignored)");
        return;
    }
    if (CGPU_OK != e->st) {
        sl->state = SLOT_FREE;
        op->busy--;
        cgpu_proxy.busy[k]--;
        if (e->canceled && op->cancelling) {
            cgpu_proxy_op_cancel(op, CGPU_ERR_TIMEOUT);
        } else if (e->canceled) { /* nobody asked: the provider gave up (a peer that died) */
            op_error(op, CGPU_ERR_PEER,
                     "the provider cancelled it (the connection to the peer was lost)");
        } else {
            op_error(op, e->st, e->msg);
        }
    } else if (PROXY_KIND_RECV == k && e->len != sl->len) {
        char what[128];
        snprintf(what, sizeof(what),
                 "chunk %u carried %zu bytes where %zu were expected (sizes differ between "
                 "sender and receiver)",
                 sl->chunk, e->len, sl->len);
        sl->state = SLOT_FREE;
        op->busy--;
        cgpu_proxy.busy[k]--;
        op_error(op, CGPU_ERR_INVALID_ARG, what);
    } else if (PROXY_KIND_RECV == k && 0 != (op->kind & PROXY_STAGED)) {
        cgpu_status_t st = op->cancelling ? CGPU_OK : slot_copy(op, (int) (sl - op->slot));
        if (CGPU_IN_PROGRESS == st) {
            sl->state = SLOT_COPYING;
        } else {
            slot_done(op, sl);
            if (CGPU_OK != st) {
                op_error(op, st, "staging copy failed");
            }
        }
    } else {
        slot_done(op, sl);
    }
    (void) cgpu_proxy_op_advance(op);
}

/* A free operation, a new one past those made so far (at most the window plus one per group
 * and direction are ever in use). */
static proxy_op_t *op_alloc(void)
{
    for (int i = 0; i < cgpu_proxy.nops; ++i) {
        if (!cgpu_proxy.ops[i]->in_use) {
            cgpu_proxy.ops[i]->in_use = true;
            return cgpu_proxy.ops[i];
        }
    }
    if (cgpu_proxy.nops == cgpu_proxy.ops_cap) {
        const int cap = cgpu_proxy.ops_cap > 0 ? 2 * cgpu_proxy.ops_cap : 16;
        proxy_op_t **ops = realloc(cgpu_proxy.ops, sizeof(*ops) * (size_t) cap);
        if (NULL == ops) {
            return NULL;
        }
        cgpu_proxy.ops = ops;
        cgpu_proxy.ops_cap = cap;
    }
    proxy_op_t *op = calloc(1, sizeof(*op));
    if (NULL == op) {
        return NULL;
    }
    cgpu_proxy.ops[cgpu_proxy.nops++] = op;
    op->in_use = true;
    return op;
}

/* Start request @p r as an operation; false if it must wait (nothing changed then). */
bool cgpu_proxy_op_start(cgpu_proxy_req_t *r, proxy_pair_t *pair)
{
    const int k = cgpu_proxy_req_kind(r);
    cgpu_proxy_group_t *g = r->group;
    proxy_peer_t *peer = g->peers[r->peer];
    proxy_op_t *op = op_alloc();
    cgpu_status_t st = CGPU_OK;

    if (NULL == op) {
        if (NULL != pair && pair->temp_bytes > 0) {
            cgpu_proxy_pair_temp_free(pair);
        } else if (NULL != pair) {
            pair->busy = false;
        }
        cgpu_log(CGPU_LOG_WARN, "proxy: %s of %zu bytes %s rank %d of group %u: no memory for it",
                 cgpu_proxy_kind_name(r->kind), r->bytes, cgpu_proxy_kind_dir(r->kind), r->peer,
                 g->context_id);
        cgpu_proxy_req_end(r, CGPU_ERR_NO_MEMORY);
        return true;
    }
    cgpu_proxy.active[k]++;
    g->active[k]++;
    op->counted = true;
    op->req = r;
    op->group = g;
    op->peer = r->peer;
    op->tag = r->tag;
    op->kind = r->kind;
    op->buf = r->buf;
    op->bytes = r->bytes;
    op->pair = pair;
    op->status = CGPU_OK;
    op->nchunks =
        0 == r->bytes ? 1 : (uint32_t) ((r->bytes + cgpu_proxy.chunk - 1) / cgpu_proxy.chunk);
    op->nslots = op->nchunks > 1 ? 2 : 1;
    for (int s = 0; s < 2; ++s) {
        op->slot[s].op = op;
        op->slot[s].state = SLOT_FREE;
    }
    r->priv = op;
    if (cgpu_proxy.directed) {
        op->tag_base = ((uint64_t) (g->context_id & 0xfffffu) << 32) | r->tag;
    } else {
        const uint64_t src = PROXY_KIND_SEND == k ? (uint64_t) g->rank : (uint64_t) r->peer;
        op->tag_base = ((uint64_t) (g->context_id & 0xfffu) << 40) | ((src & 0xffffu) << 24) |
                       (r->tag & 0xffffffu);
    }
    if (!peer->inserted) {
        st = cgpu_ofi_insert(cgpu_proxy.ofi, peer->name, &peer->addr);
        if (CGPU_OK != st) {
            op_error(op, st, "its address was refused by the address vector");
            op_finish(op);
            return true;
        }
        peer->inserted = true;
        const int n = atomic_fetch_add(&cgpu_proxy_nconnected, 1) + 1;
        cgpu_log(CGPU_LOG_DEBUG, "proxy: connected to rank %d of group %u (%d peer(s) now)",
                 r->peer, g->context_id, n);
    }
    op->addr = peer->addr;
    if (0 != (r->kind & PROXY_DEVICE) && r->bytes > 0) {
        const int dev = (r->kind >> PROXY_DEV_SHIFT) - 1;
        st = cgpu_ofi_reg_cuda(cgpu_proxy.ofi, r->buf, r->bytes, dev, &op->mr, &op->desc);
        if (CGPU_OK != st) {
            op_error(op, st, "device memory registration failed");
            op_finish(op);
            return true;
        }
    }
    (void) cgpu_proxy_op_advance(op);
    return true;
}

int cgpu_proxy_poll(void)
{
    cgpu_ofi_cqe_t cqe[PROXY_POLL_BATCH];
    int n = cgpu_ofi_poll(cgpu_proxy.ofi, cqe, PROXY_POLL_BATCH);
    if (n < 0) {
        return 0; /* logged by cgpu_ofi; the queue is polled again */
    }
    for (int i = 0; i < n; ++i) {
        op_completion(&cqe[i]);
    }
    return n;
}
