/*
 * coll/gpu libfabric boundary: loading the library, provider choice, endpoint, completions,
 * conversions.
 *
 * The plugin does not link libfabric. Loading it pulls in the provider libraries it was
 * built with, some of which do costly work in their constructors (Debian's links libpsm2
 * and libinfinipath, which calibrate a clock with short sleeps: about 0.2 s in all), and a
 * job whose communicators never span nodes must not pay that at MPI_Init. So the library is opened with dlopen at the
 * first cgpu_ofi_open, which the proxy calls when a communicator first needs the
 * inter-node path. libfabric's API is almost all static inline functions over the ops
 * tables of the objects it returns; the few real functions called are looked up into
 * ofi_fn, each at the symbol version a program linked against the same headers would use
 * (read by configure, m4/cgpu_libfabric.m4).
 *
 * Everything here runs on the proxy's progress thread (FI_THREAD_DOMAIN). Errors are
 * converted in ofi_status() and logged with what was being done, so a failure leaves a
 * trail "ofi: <call> failed: <libfabric's words> (<number>)".
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* dlvsym */
#endif
#define CGPU_LOG_SUBSYS CGPU_SUB_NET
#include "cgpu_config.h"

#ifdef CGPU_HAVE_LIBFABRIC

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include "cgpu_ofi.h"
#include "cgpu_log.h"

_Static_assert(sizeof(struct fi_context2) <= CGPU_OFI_CTX_BYTES, "room for fi_context2");

/* libfabric's exported functions this file calls; filled once by ofi_load. The library
 * then stays loaded for the life of the process: loading it again would run the
 * constructors again, and it cleans up at exit itself. */
typedef int (*ofi_getinfo_fn)(uint32_t version, const char *node, const char *service,
                              uint64_t flags, const struct fi_info *hints, struct fi_info **info);
typedef void (*ofi_freeinfo_fn)(struct fi_info *info);
typedef struct fi_info *(*ofi_dupinfo_fn)(const struct fi_info *info);
typedef int (*ofi_fabric_fn)(struct fi_fabric_attr *attr, struct fid_fabric **fabric,
                             void *context);
typedef const char *(*ofi_strerror_fn)(int errnum);
static struct {
    ofi_getinfo_fn getinfo;
    ofi_freeinfo_fn freeinfo;
    ofi_dupinfo_fn dupinfo; /* dupinfo(NULL) is what the inline fi_allocinfo() does */
    ofi_fabric_fn fabric;
    ofi_strerror_fn strerror;
} ofi_fn;

static pthread_once_t ofi_load_once = PTHREAD_ONCE_INIT;
static cgpu_status_t ofi_load_st = CGPU_ERR_NOT_SUPPORTED;

/* One function of the library at @p version ("": the library's default); NULL, with a
 * warning, when it is missing. */
static void *ofi_sym(void *lib, const char *name, const char *version)
{
    void *fn = '\0' != version[0] ? dlvsym(lib, name, version) : dlsym(lib, name);
    if (NULL == fn) {
        cgpu_log(CGPU_LOG_WARN,
                 "proxy/ofi: %s has no function %s%s%s, which coll/gpu was built against "
                 "(a libfabric older than the one at build time?); the inter-node path is off "
                 "in this process, communicators that span nodes use the fallback. Install the "
                 "libfabric coll/gpu was built with, or rebuild coll/gpu against this one",
                 CGPU_OFI_SONAME, name, '\0' != version[0] ? "@" : "", version);
    }
    return fn;
}

static void ofi_load_run(void)
{
    /* RTLD_LOCAL: none of libfabric's names are needed by anything but this file */
    void *lib = dlopen(CGPU_OFI_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (NULL == lib) {
        cgpu_log(CGPU_LOG_WARN,
                 "proxy/ofi: cannot load libfabric (%s): %s. coll/gpu's inter-node path is off "
                 "in this process; communicators that span nodes use the fallback (Open MPI's "
                 "own collectives). To use it, install libfabric (Debian/Ubuntu: apt-get install "
                 "libfabric1) or add the folder holding %s to LD_LIBRARY_PATH; to avoid it, "
                 "keep each communicator on one node",
                 CGPU_OFI_SONAME, dlerror(), CGPU_OFI_SONAME);
        ofi_load_st = CGPU_ERR_NOT_SUPPORTED;
        return;
    }
    ofi_fn.getinfo = (ofi_getinfo_fn) ofi_sym(lib, "fi_getinfo", CGPU_OFI_VER_GETINFO);
    ofi_fn.freeinfo = (ofi_freeinfo_fn) ofi_sym(lib, "fi_freeinfo", CGPU_OFI_VER_FREEINFO);
    ofi_fn.dupinfo = (ofi_dupinfo_fn) ofi_sym(lib, "fi_dupinfo", CGPU_OFI_VER_DUPINFO);
    ofi_fn.fabric = (ofi_fabric_fn) ofi_sym(lib, "fi_fabric", CGPU_OFI_VER_FABRIC);
    ofi_fn.strerror = (ofi_strerror_fn) ofi_sym(lib, "fi_strerror", CGPU_OFI_VER_STRERROR);
    if (NULL == ofi_fn.getinfo || NULL == ofi_fn.freeinfo || NULL == ofi_fn.dupinfo ||
        NULL == ofi_fn.fabric || NULL == ofi_fn.strerror) {
        /* not closed: its constructors ran, and unloading gains nothing */
        ofi_load_st = CGPU_ERR_NOT_SUPPORTED;
        return;
    }
    cgpu_log(CGPU_LOG_DEBUG, "proxy/ofi: %s loaded", CGPU_OFI_SONAME);
    ofi_load_st = CGPU_OK;
}

/* Load libfabric on first use, from any thread; later calls return the first answer (its
 * warning is printed once). */
static cgpu_status_t ofi_load(void)
{
    (void) pthread_once(&ofi_load_once, ofi_load_run);
    return ofi_load_st;
}

struct cgpu_ofi {
    struct fi_info *info;
    struct fid_fabric *fabric;
    struct fid_domain *domain;
    struct fid_av *av;
    struct fid_cq *cq;
    struct fid_ep *ep;
    char provider[64];
    bool hmem;
    bool directed;
    uint64_t next_key; /* requested MR keys, when the provider does not pick them */
};

/* The one conversion of libfabric error numbers (positive FI_E* / errno values). */
static cgpu_status_t ofi_status(int err)
{
    switch (err) {
    case 0:
        return CGPU_OK;
    case FI_EAGAIN:
        return CGPU_IN_PROGRESS;
    case FI_ENOMEM:
        return CGPU_ERR_NO_MEMORY;
    case FI_ENODATA:
    case FI_ENOSYS:
    case FI_EOPNOTSUPP:
        return CGPU_ERR_NOT_SUPPORTED;
    case FI_EINVAL:
    case FI_ETRUNC:
    case FI_EMSGSIZE:
    case FI_EBADFLAGS:
        return CGPU_ERR_INVALID_ARG;
    case FI_ETIMEDOUT:
    case FI_ECANCELED:
        return CGPU_ERR_TIMEOUT;
    case FI_ECONNREFUSED:
    case FI_ECONNRESET:
    case FI_ECONNABORTED:
    case FI_ENOTCONN:
    case FI_EHOSTUNREACH:
    case FI_ENETUNREACH:
    case FI_ENETDOWN:
    case FI_EADDRNOTAVAIL:
    case FI_EIO:
    case FI_EREMOTEIO:
        return CGPU_ERR_PEER;
    case FI_ENOSPC:
    case FI_ETOOSMALL:
    case FI_ENOBUFS:
        return CGPU_ERR_NO_RESOURCE;
    default:
        return CGPU_ERR_SYSTEM;
    }
}

/* Convert a negative return of a libfabric call, logging it (not for -FI_EAGAIN). */
static cgpu_status_t ofi_check(ssize_t rc, const char *what)
{
    if (rc >= 0) {
        return CGPU_OK;
    }
    const int err = (int) -rc;
    if (FI_EAGAIN != err) {
        cgpu_log(CGPU_LOG_WARN, "proxy/ofi: %s failed: %s (%d)", what, ofi_fn.strerror(err), -err);
    }
    return ofi_status(err);
}

/* Sockets-style providers, taken only when nothing faster is offered. */
static bool ofi_is_fallback(const char *prov)
{
    static const char *const slow[] = {"tcp", "udp", "sockets", "net", "shm"};
    size_t len = strcspn(prov, ";");
    for (size_t k = 0; k < sizeof(slow) / sizeof(slow[0]); ++k) {
        if (strlen(slow[k]) == len && 0 == strncmp(prov, slow[k], len)) {
            return true;
        }
    }
    return false;
}

static bool ofi_core_is(const char *prov, const char *name)
{
    size_t len = strcspn(prov, ";");
    return strlen(name) == len && 0 == strncmp(prov, name, len);
}

/* Hints every attempt shares; NULL when out of memory. */
static struct fi_info *ofi_hints(const char *provider, bool directed, bool sas, bool hmem)
{
    struct fi_info *h = ofi_fn.dupinfo(NULL);
    if (NULL == h) {
        return NULL;
    }
    h->caps = FI_TAGGED | FI_MSG | (directed ? FI_DIRECTED_RECV : 0) | (hmem ? FI_HMEM : 0);
    h->mode = FI_CONTEXT | FI_CONTEXT2;
    h->ep_attr->type = FI_EP_RDM;
    h->domain_attr->threading = FI_THREAD_DOMAIN;
    h->domain_attr->av_type = FI_AV_TABLE;
    /* modes that only matter for registered memory, which we handle; FI_MR_LOCAL (host
     * buffers registered before every post) is not offered */
    h->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT |
                              (hmem ? FI_MR_HMEM : 0);
    if (sas) {
        h->tx_attr->msg_order = FI_ORDER_SAS;
        h->rx_attr->msg_order = FI_ORDER_SAS;
    }
    if (NULL != provider && '\0' != provider[0]) {
        h->fabric_attr->prov_name = strdup(provider);
        if (NULL == h->fabric_attr->prov_name) {
            ofi_fn.freeinfo(h);
            return NULL;
        }
    }
    return h;
}

/* fi_getinfo with @p hints; *list is NULL when nothing matched. */
static cgpu_status_t ofi_getinfo(struct fi_info *hints, struct fi_info **list)
{
    *list = NULL;
    int rc =
        ofi_fn.getinfo(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), NULL, NULL, 0, hints, list);
    if (-FI_ENODATA == rc) {
        *list = NULL;
        return CGPU_OK;
    }
    return ofi_check(rc, "fi_getinfo");
}

/* The entry of @p list to use: see cgpu_ofi_open. */
static struct fi_info *ofi_pick(struct fi_info *list, bool named)
{
    if (named) {
        return list;
    }
    for (struct fi_info *p = list; NULL != p; p = p->next) {
        if (!ofi_is_fallback(p->fabric_attr->prov_name)) {
            return p;
        }
    }
    for (struct fi_info *p = list; NULL != p; p = p->next) {
        if (ofi_core_is(p->fabric_attr->prov_name, "tcp")) {
            return p;
        }
    }
    return list;
}

/*
 * Choose the provider: directed receive and send-after-send ordering are asked first and
 * dropped one at a time when nothing offers them; FI_HMEM is then asked of the chosen
 * provider alone, so that a provider with FI_HMEM never wins over a faster one without.
 * *out is a one-entry list the caller frees.
 */
static cgpu_status_t ofi_choose(const cgpu_ofi_opts_t *opts, struct fi_info **out)
{
    const bool named = NULL != opts->provider && '\0' != opts->provider[0];
    struct fi_info *list = NULL, *pick = NULL;
    cgpu_status_t st = CGPU_OK;

    *out = NULL;
    for (int attempt = 0; attempt < 4 && NULL == pick; ++attempt) {
        const bool directed = !opts->no_directed && attempt < 2;
        const bool sas = 0 == attempt % 2;
        if (opts->no_directed && attempt < 2) {
            continue;
        }
        struct fi_info *hints = ofi_hints(opts->provider, directed, sas, false);
        if (NULL == hints) {
            return CGPU_ERR_NO_MEMORY;
        }
        st = ofi_getinfo(hints, &list);
        ofi_fn.freeinfo(hints);
        if (CGPU_OK != st) {
            return st;
        }
        if (NULL != list) {
            pick = ofi_pick(list, named);
        }
    }
    if (NULL == pick) {
        cgpu_log(CGPU_LOG_WARN,
                 "proxy/ofi: no libfabric provider%s%s%s offers reliable tagged messages "
                 "(FI_EP_RDM, FI_TAGGED); set coll_gpu_ofi_provider to one that does (tcp, shm, "
                 "verbs, efa ...) or keep ranks on one node",
                 named ? " named \"" : "", named ? opts->provider : "", named ? "\"" : "");
        return CGPU_ERR_NOT_SUPPORTED;
    }
    struct fi_info *one = ofi_fn.dupinfo(pick);
    ofi_fn.freeinfo(list);
    if (NULL == one) {
        return CGPU_ERR_NO_MEMORY;
    }
    one->next = NULL;

    if (opts->want_hmem) {
        const bool directed = 0 != (one->caps & FI_DIRECTED_RECV);
        const bool sas = 0 != (one->tx_attr->msg_order & FI_ORDER_SAS);
        struct fi_info *hints = ofi_hints(one->fabric_attr->prov_name, directed, sas, true);
        struct fi_info *hl = NULL;
        if (NULL != hints) {
            free(hints->domain_attr->name);
            hints->domain_attr->name = NULL;
            if (NULL != one->domain_attr->name) {
                hints->domain_attr->name = strdup(one->domain_attr->name);
            }
            if (CGPU_OK == ofi_getinfo(hints, &hl) && NULL != hl) {
                struct fi_info *h1 = ofi_fn.dupinfo(hl);
                if (NULL != h1) {
                    h1->next = NULL;
                    ofi_fn.freeinfo(one);
                    one = h1;
                }
                ofi_fn.freeinfo(hl);
            }
            ofi_fn.freeinfo(hints);
        }
    }
    *out = one;
    return CGPU_OK;
}

bool cgpu_ofi_shm_region(const void *name, char *path, size_t len)
{
    char nm[CGPU_OFI_NAME_BYTES + 1] = {0};
    memcpy(nm, name, CGPU_OFI_NAME_BYTES);
    const char *base = 0 == strncmp(nm, "fi_shm://", 9) ? nm + 9 : nm;
    if ('\0' == base[0] || NULL != strchr(base, '/')) {
        return false;
    }
    return (size_t) snprintf(path, len, "/dev/shm/%s", base) < len;
}

/* Whether the shm region of this (not yet enabled) endpoint's name already exists; @p name
 * (CGPU_OFI_NAME_BYTES) gets that name. */
static bool ofi_shm_name_taken(cgpu_ofi_t *o, char *name)
{
    char path[CGPU_OFI_NAME_BYTES + 16];
    size_t len = CGPU_OFI_NAME_BYTES;
    memset(name, 0, CGPU_OFI_NAME_BYTES);
    return 0 == fi_getname(&o->ep->fid, name, &len) && len <= CGPU_OFI_NAME_BYTES &&
           cgpu_ofi_shm_region(name, path, sizeof(path)) && 0 == access(path, F_OK);
}

/*
 * The endpoint, bound to the queue and the address vector, then enabled. The shm provider
 * names its shared-memory region after the process id ("<pid>:0:0"), and a process killed
 * before closing its endpoint leaves that region in /dev/shm: a later process given the
 * same pid (pids wrap; another pid namespace sharing /dev/shm) would fail fi_enable with
 * EBUSY, and on its way out the provider would unlink the region, maybe a live process's.
 * So over shm a name whose region exists is replaced before enabling by the provider's
 * name with a suffix of ours; the peers learn the name from fi_getname as always.
 */
static cgpu_status_t ofi_ep_open(cgpu_ofi_t *o)
{
    cgpu_status_t st = ofi_check(fi_endpoint(o->domain, o->info, &o->ep, NULL), "fi_endpoint");
    if (CGPU_OK != st) {
        return st;
    }
    st = ofi_check(fi_ep_bind(o->ep, &o->cq->fid, FI_TRANSMIT | FI_RECV), "fi_ep_bind(cq)");
    if (CGPU_OK == st) {
        st = ofi_check(fi_ep_bind(o->ep, &o->av->fid, 0), "fi_ep_bind(av)");
    }
    char base[CGPU_OFI_NAME_BYTES], name[CGPU_OFI_NAME_BYTES];
    if (CGPU_OK == st && 0 == strcmp(o->provider, "shm") && ofi_shm_name_taken(o, base)) {
        for (int k = 1; CGPU_OK == st; ++k) {
            if (k > 8 || (size_t) snprintf(name, sizeof(name), "%s:cgpu%d", base, k) >=
                             sizeof(name)) {
                cgpu_log(CGPU_LOG_WARN,
                         "proxy/ofi: shm endpoint name %s is taken (a region left in /dev/shm "
                         "by a process with this pid that did not close its endpoint), and so "
                         "are the names tried after it",
                         base);
                st = CGPU_ERR_SYSTEM;
                break;
            }
            char now[CGPU_OFI_NAME_BYTES];
            st = ofi_check(fi_setname(&o->ep->fid, name, strlen(name) + 1), "fi_setname");
            if (CGPU_OK == st && !ofi_shm_name_taken(o, now)) {
                cgpu_log(CGPU_LOG_INFO,
                         "proxy/ofi: shm endpoint name %s is taken (a region left in /dev/shm "
                         "by a process with this pid that did not close its endpoint); this "
                         "process uses %s",
                         base, name);
                break;
            }
        }
    }
    if (CGPU_OK == st) {
        st = ofi_check(fi_enable(o->ep), "fi_enable");
    }
    if (CGPU_OK != st) {
        fi_close(&o->ep->fid);
        o->ep = NULL;
    }
    return st;
}

cgpu_status_t cgpu_ofi_open(const cgpu_ofi_opts_t *opts, cgpu_ofi_t **out)
{
    cgpu_status_t st;
    struct fi_cq_attr cq_attr = {0};
    struct fi_av_attr av_attr = {0};
    cgpu_ofi_t *o = calloc(1, sizeof(*o));

    *out = NULL;
    if (NULL == o) {
        return CGPU_ERR_NO_MEMORY;
    }
    st = ofi_load();
    if (CGPU_OK != st) {
        goto out_free;
    }
    st = ofi_choose(opts, &o->info);
    if (CGPU_OK != st) {
        goto out_free;
    }
    snprintf(o->provider, sizeof(o->provider), "%s", o->info->fabric_attr->prov_name);
    o->hmem = 0 != (o->info->caps & FI_HMEM);
    o->directed = 0 != (o->info->caps & FI_DIRECTED_RECV);
    o->next_key = 1;
    if (o->info->src_addrlen > CGPU_OFI_NAME_BYTES) {
        cgpu_log(CGPU_LOG_WARN,
                 "proxy/ofi: provider %s has %zu-byte endpoint names; at most %d are exchanged",
                 o->provider, o->info->src_addrlen, CGPU_OFI_NAME_BYTES);
        st = CGPU_ERR_NOT_SUPPORTED;
        goto out_free_info;
    }

    st = ofi_check(ofi_fn.fabric(o->info->fabric_attr, &o->fabric, NULL), "fi_fabric");
    if (CGPU_OK != st) {
        goto out_free_info;
    }
    st = ofi_check(fi_domain(o->fabric, o->info, &o->domain, NULL), "fi_domain");
    if (CGPU_OK != st) {
        goto out_close_fabric;
    }
    cq_attr.format = FI_CQ_FORMAT_TAGGED;
    cq_attr.wait_obj = FI_WAIT_NONE;
    cq_attr.size = opts->cq_size;
    st = ofi_check(fi_cq_open(o->domain, &cq_attr, &o->cq, NULL), "fi_cq_open");
    if (CGPU_OK != st) {
        goto out_close_domain;
    }
    av_attr.type = FI_AV_TABLE;
    av_attr.count = opts->av_size;
    /* some providers refuse an address vector larger than their peer limit (shm: 256) */
    if (o->info->domain_attr->ep_cnt > 0 && av_attr.count > o->info->domain_attr->ep_cnt) {
        cgpu_log(CGPU_LOG_INFO,
                 "proxy/ofi: provider %s reaches %zu peers at most (address vector sized so)",
                 o->provider, o->info->domain_attr->ep_cnt);
        av_attr.count = o->info->domain_attr->ep_cnt;
    }
    st = ofi_check(fi_av_open(o->domain, &av_attr, &o->av, NULL), "fi_av_open");
    if (CGPU_OK != st) {
        goto out_close_cq;
    }
    st = ofi_ep_open(o);
    if (CGPU_OK != st) {
        goto out_close_av;
    }
    cgpu_log(CGPU_LOG_INFO,
             "proxy/ofi: provider %s (fabric %s, domain %s): directed receive %s, send-after-send "
             "order %s, FI_HMEM %s, largest message %zu bytes",
             o->provider, o->info->fabric_attr->name, o->info->domain_attr->name,
             o->directed ? "yes" : "no (source rank carried in the tag)",
             0 != (o->info->tx_attr->msg_order & FI_ORDER_SAS) ? "yes" : "no",
             o->hmem ? "yes (device memory goes directly)" : "no (device memory staged)",
             o->info->ep_attr->max_msg_size);
    *out = o;
    return CGPU_OK;

out_close_av:
    fi_close(&o->av->fid);
out_close_cq:
    fi_close(&o->cq->fid);
out_close_domain:
    fi_close(&o->domain->fid);
out_close_fabric:
    fi_close(&o->fabric->fid);
out_free_info:
    ofi_fn.freeinfo(o->info);
out_free:
    free(o);
    return st;
}

/* Closing after a peer died may find the provider still holding an operation that could
 * not be cancelled (-FI_EBUSY): nothing to do about it then, so it is said at verbose 10. */
static void ofi_close_fid(struct fid *fid, const char *what)
{
    int rc = fi_close(fid);
    if (0 != rc) {
        cgpu_log(CGPU_LOG_INFO, "proxy/ofi: fi_close(%s): %s (%d)", what, ofi_fn.strerror(-rc), rc);
    }
}

void cgpu_ofi_close(cgpu_ofi_t **op)
{
    cgpu_ofi_t *o = *op;
    if (NULL == o) {
        return;
    }
    *op = NULL;
    ofi_close_fid(&o->ep->fid, "endpoint");
    ofi_close_fid(&o->av->fid, "address vector");
    ofi_close_fid(&o->cq->fid, "completion queue");
    ofi_close_fid(&o->domain->fid, "domain");
    ofi_close_fid(&o->fabric->fid, "fabric");
    ofi_fn.freeinfo(o->info);
    free(o);
}

const char *cgpu_ofi_provider(const cgpu_ofi_t *o)
{
    return o->provider;
}

bool cgpu_ofi_hmem(const cgpu_ofi_t *o)
{
    return o->hmem;
}

bool cgpu_ofi_directed(const cgpu_ofi_t *o)
{
    return o->directed;
}

size_t cgpu_ofi_max_msg(const cgpu_ofi_t *o)
{
    return o->info->ep_attr->max_msg_size;
}

cgpu_status_t cgpu_ofi_getname(cgpu_ofi_t *o, void *name)
{
    size_t len = CGPU_OFI_NAME_BYTES;
    memset(name, 0, CGPU_OFI_NAME_BYTES);
    cgpu_status_t st = ofi_check(fi_getname(&o->ep->fid, name, &len), "fi_getname");
    if (CGPU_OK == st && len > CGPU_OFI_NAME_BYTES) {
        st = CGPU_ERR_NOT_SUPPORTED;
    }
    return st;
}

cgpu_status_t cgpu_ofi_insert(cgpu_ofi_t *o, const void *name, uint64_t *addr)
{
    fi_addr_t a = FI_ADDR_NOTAVAIL;
    int n = fi_av_insert(o->av, name, 1, &a, 0, NULL);
    if (n < 0) {
        return ofi_check(n, "fi_av_insert");
    }
    if (1 != n || FI_ADDR_NOTAVAIL == a) {
        cgpu_log(CGPU_LOG_WARN, "proxy/ofi: fi_av_insert did not accept a peer's name");
        return CGPU_ERR_INVALID_ARG;
    }
    *addr = (uint64_t) a;
    return CGPU_OK;
}

cgpu_status_t cgpu_ofi_tsend(cgpu_ofi_t *o, const void *buf, size_t len, void *desc, uint64_t dest,
                             uint64_t tag, void *ctx)
{
    return ofi_check(fi_tsend(o->ep, buf, len, desc, (fi_addr_t) dest, tag, ctx), "fi_tsend");
}

cgpu_status_t cgpu_ofi_trecv(cgpu_ofi_t *o, void *buf, size_t len, void *desc, uint64_t src,
                             uint64_t tag, void *ctx)
{
    const fi_addr_t from = CGPU_OFI_ADDR_ANY == src ? FI_ADDR_UNSPEC : (fi_addr_t) src;
    return ofi_check(fi_trecv(o->ep, buf, len, desc, from, tag, 0, ctx), "fi_trecv");
}

/* Read the error completion waiting at the head of the queue. */
static void ofi_read_error(cgpu_ofi_t *o, cgpu_ofi_cqe_t *e)
{
    struct fi_cq_err_entry err;
    memset(&err, 0, sizeof(err));
    memset(e, 0, sizeof(*e));
    ssize_t rc = fi_cq_readerr(o->cq, &err, 0);
    if (rc < 0) {
        e->st = ofi_check(rc, "fi_cq_readerr");
        snprintf(e->msg, sizeof(e->msg), "fi_cq_readerr: %s", ofi_fn.strerror((int) -rc));
        return;
    }
    e->ctx = err.op_context;
    e->len = err.len;
    e->canceled = FI_ECANCELED == err.err;
    e->st = ofi_status(err.err);
    if (CGPU_OK == e->st) { /* an error entry always reports a failure */
        e->st = CGPU_ERR_SYSTEM;
    }
    const char *prov = fi_cq_strerror(o->cq, err.prov_errno, err.err_data, NULL, 0);
    snprintf(e->msg, sizeof(e->msg), "%s (%d; provider: %s)", ofi_fn.strerror(err.err), err.err,
             NULL != prov ? prov : "-");
}

int cgpu_ofi_poll(cgpu_ofi_t *o, cgpu_ofi_cqe_t *out, int max)
{
    struct fi_cq_tagged_entry ent[16];
    if (max > 16) {
        max = 16;
    }
    ssize_t n = fi_cq_read(o->cq, ent, (size_t) max);
    if (-FI_EAGAIN == n) {
        return 0;
    }
    if (-FI_EAVAIL == n) {
        ofi_read_error(o, &out[0]);
        return NULL != out[0].ctx ? 1 : (int) out[0].st;
    }
    if (n < 0) {
        return (int) ofi_check(n, "fi_cq_read");
    }
    for (ssize_t k = 0; k < n; ++k) {
        out[k].ctx = ent[k].op_context;
        out[k].len = ent[k].len;
        out[k].st = CGPU_OK;
        out[k].canceled = false;
        out[k].msg[0] = '\0';
    }
    return (int) n;
}

void cgpu_ofi_cancel(cgpu_ofi_t *o, void *ctx)
{
    ssize_t rc = fi_cancel(&o->ep->fid, ctx);
    /* -FI_ENOENT: already matched or finished; the completion comes anyway */
    if (rc < 0 && -FI_ENOENT != rc) {
        (void) ofi_check(rc, "fi_cancel");
    }
}

/* fi_mr_regattr of CUDA memory; libfabric's return code. */
static int regattr_cuda(cgpu_ofi_t *o, void *buf, size_t len, int device, struct fid_mr **m)
{
    struct iovec iov = {.iov_base = buf, .iov_len = len};
    struct fi_mr_attr attr = {0};
    attr.mr_iov = &iov;
    attr.iov_count = 1;
    attr.access = FI_SEND | FI_RECV;
    attr.requested_key = o->next_key++;
    attr.iface = FI_HMEM_CUDA;
    attr.device.cuda = device;
    return fi_mr_regattr(o->domain, &attr, 0, m);
}

cgpu_status_t cgpu_ofi_probe_cuda(cgpu_ofi_t *o, void *buf, size_t len, int device)
{
    if (!o->hmem) {
        return CGPU_ERR_NOT_SUPPORTED;
    }
    struct fid_mr *m = NULL;
    const int rc = regattr_cuda(o, buf, len, device, &m);
    if (0 != rc) { /* an answer, not a failure: no warning */
        cgpu_log(CGPU_LOG_INFO, "proxy/ofi: registering CUDA memory: %s (%d)", ofi_fn.strerror(-rc),
                 rc);
        return ofi_status(-rc);
    }
    fi_close(&m->fid);
    return CGPU_OK;
}

cgpu_status_t cgpu_ofi_reg_cuda(cgpu_ofi_t *o, void *buf, size_t len, int device, void **mr,
                                void **desc)
{
    /* registered even where FI_MR_HMEM is not asked for: the descriptor is what tells the
     * provider the buffer is CUDA memory (a NULL one means host memory) */
    *mr = *desc = NULL;
    if (!o->hmem) {
        return CGPU_OK;
    }
    struct fid_mr *m = NULL;
    cgpu_status_t st = ofi_check(regattr_cuda(o, buf, len, device, &m), "fi_mr_regattr(cuda)");
    if (CGPU_OK != st) {
        return st;
    }
    if (0 != (o->info->domain_attr->mr_mode & FI_MR_ENDPOINT)) {
        st = ofi_check(fi_mr_bind(m, &o->ep->fid, 0), "fi_mr_bind");
        if (CGPU_OK == st) {
            st = ofi_check(fi_mr_enable(m), "fi_mr_enable");
        }
        if (CGPU_OK != st) {
            fi_close(&m->fid);
            return st;
        }
    }
    *mr = m;
    *desc = fi_mr_desc(m);
    return CGPU_OK;
}

void cgpu_ofi_dereg(void *mr)
{
    if (NULL != mr) {
        (void) ofi_check(fi_close(&((struct fid_mr *) mr)->fid), "fi_close(mr)");
    }
}

#endif /* CGPU_HAVE_LIBFABRIC */
