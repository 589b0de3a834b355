/*
 * coll/gpu engine, communicators across nodes: the node-local communicator's bootstrap.
 *
 * The ranks of one node make their communicator (cgpu_comm_create) with a bootstrap of
 * their own, since the MPI communicator's spans every node: an allgather and a barrier
 * among the node's ranks, carried by the proxy group of the communicator across nodes
 * under the tags reserved for it (the top bit, a round counter; see net_internal.h).
 */
#include <stdlib.h>
#include <string.h>

#include "net_internal.h"

/* Tag of the node-local bootstrap's round @p n: the top bit of the tag width, and never all
 * ones (the failure notices' tag, cgpu_net_notice_tag). */
static uint32_t boot_tag(const cgpu_net_t *net, uint32_t n)
{
    return net->wide ? 0x80000000u | (n % 0x7fffffffu) : 0x800000u | (n % 0x7fffffu);
}

/* Every local peer sends its bytes to every other. */
cgpu_status_t cgpu_net_local_allgather(void *ctx, const void *sbuf, void *rbuf, size_t bytes)
{
    cgpu_comm_t *comm = ctx;
    cgpu_net_t *net = comm->net;
    const int L = net->local_size, me = net->local_index;
    const uint32_t tag = boot_tag(net, net->bs_round++);
    memcpy((char *) rbuf + (size_t) me * bytes, sbuf, bytes);
    cgpu_proxy_req_t *reqs = calloc(2 * (size_t) L, sizeof(*reqs));
    if (NULL == reqs) {
        return CGPU_ERR_NO_MEMORY;
    }
    cgpu_status_t st = CGPU_OK;
    int n = 0;
    for (int j = 0; j < L && CGPU_OK == st; ++j) {
        if (j != me) {
            st = cgpu_proxy_irecv(net->group, cgpu_net_node_rank(net, net->node, j),
                                  (char *) rbuf + (size_t) j * bytes, bytes, tag, &reqs[n]);
            n += CGPU_OK == st;
        }
    }
    for (int j = 0; j < L && CGPU_OK == st; ++j) {
        if (j != me) {
            st = cgpu_proxy_isend(net->group, cgpu_net_node_rank(net, net->node, j), sbuf, bytes,
                                  tag, &reqs[n]);
            n += CGPU_OK == st;
        }
    }
    cgpu_status_t w = cgpu_net_wait(comm, reqs, n);
    free(reqs);
    return CGPU_OK != st ? st : w;
}

cgpu_status_t cgpu_net_local_barrier(void *ctx)
{
    cgpu_comm_t *comm = ctx;
    char one = 1, *all = malloc((size_t) comm->net->local_size);
    if (NULL == all) {
        return CGPU_ERR_NO_MEMORY;
    }
    cgpu_status_t st = cgpu_net_local_allgather(ctx, &one, all, 1);
    free(all);
    return st;
}
