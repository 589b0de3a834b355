/*
 * coll/gpu libfabric boundary: every call into libfabric lives in cgpu_ofi.c.
 *
 * One object is one provider choice, one domain, one reliable-datagram (FI_EP_RDM)
 * endpoint, one tagged completion queue and one address-vector table. The proxy
 * (coll_gpu/engine/cgpu_proxy.c) drives it from its progress thread only, so the
 * domain is opened with FI_THREAD_DOMAIN: no locking inside the provider is asked for.
 * libfabric error numbers are converted to cgpu_status_t here and nowhere else.
 *
 * Built only when configure found libfabric's headers (CGPU_HAVE_LIBFABRIC). The library
 * itself is not linked: cgpu_ofi_open loads it with dlopen the first time it is called, so
 * a process that never reaches another node never loads it (see cgpu_ofi.c).
 */
#ifndef CGPU_OFI_H
#define CGPU_OFI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cgpu_status.h"

/** Bytes a caller reserves, at the start of its per-operation struct, for libfabric's
 * operation context (struct fi_context2 under FI_CONTEXT2 mode; checked in cgpu_ofi.c). */
#define CGPU_OFI_CTX_BYTES 64

/** Source of a receive that accepts any sender (only without directed receive). */
#define CGPU_OFI_ADDR_ANY UINT64_MAX

/** Longest endpoint name the proxy exchanges (equal to CGPU_PROXY_ADDR_BYTES). */
#define CGPU_OFI_NAME_BYTES 128

typedef struct cgpu_ofi cgpu_ofi_t;

/** What cgpu_ofi_open is asked for. */
typedef struct cgpu_ofi_opts {
    const char *provider; /* provider name; NULL or "": the best found (see cgpu_ofi_open) */
    bool want_hmem;       /* CUDA is usable here: ask for FI_HMEM on the chosen provider */
    bool no_directed;     /* do not ask for FI_DIRECTED_RECV (tests of the other tag layout) */
    size_t cq_size;       /* completion queue entries */
    size_t av_size;       /* address vector entries expected */
} cgpu_ofi_opts_t;

/** A completion read from the queue. */
typedef struct cgpu_ofi_cqe {
    void *ctx;        /* the context given when the operation was posted */
    size_t len;       /* bytes received (receives) */
    cgpu_status_t st; /* CGPU_OK, or the converted error */
    bool canceled;    /* ended by cgpu_ofi_cancel */
    char msg[160];    /* for an error: libfabric's and the provider's explanation */
} cgpu_ofi_cqe_t;

/**
 * Choose a provider, open fabric, domain, endpoint, completion queue and address vector.
 *
 * Provider choice: opts->provider when given (a layered one such as "tcp;ofi_rxm" matches
 * "tcp"); otherwise the first one fi_getinfo offers that is not a sockets-style fallback
 * (tcp, udp, sockets, net, shm), else tcp, else whatever comes first. Capabilities asked:
 * FI_TAGGED | FI_MSG, FI_DIRECTED_RECV when the provider has it (else the caller puts the
 * source in the tag), FI_CONTEXT/FI_CONTEXT2 modes, send-after-send ordering when offered,
 * and FI_HMEM when opts->want_hmem and the provider has it. The choice is logged at
 * verbose 10.
 *
 * The first call loads libfabric (CGPU_OFI_SONAME); when that fails, this call and every
 * later one return CGPU_ERR_NOT_SUPPORTED, and one warning says why and what to do.
 *
 * @return CGPU_ERR_NOT_SUPPORTED when libfabric cannot be loaded or no provider fits (a
 *         message says which was asked for), other errors when a step of the opening fails.
 */
cgpu_status_t cgpu_ofi_open(const cgpu_ofi_opts_t *opts, cgpu_ofi_t **out);

/** Close everything (operations still posted are dropped by the provider). NULL: no-op. */
void cgpu_ofi_close(cgpu_ofi_t **o);

/** The provider in use, e.g. "tcp;ofi_rxm". */
const char *cgpu_ofi_provider(const cgpu_ofi_t *o);
/** FI_HMEM on: CUDA device pointers may be posted (registered with cgpu_ofi_reg_cuda). */
bool cgpu_ofi_hmem(const cgpu_ofi_t *o);
/** FI_DIRECTED_RECV on: receives select their sender by address. */
bool cgpu_ofi_directed(const cgpu_ofi_t *o);
/** Largest message the endpoint sends in one operation. */
size_t cgpu_ofi_max_msg(const cgpu_ofi_t *o);

/** This endpoint's name, zero padded to CGPU_OFI_NAME_BYTES. */
cgpu_status_t cgpu_ofi_getname(cgpu_ofi_t *o, void *name);

/** The file of the shm provider's region for endpoint @p name (CGPU_OFI_NAME_BYTES, as
 * cgpu_ofi_getname gives it), "/dev/shm/<name without fi_shm://>", into @p path; false when
 * the name cannot be one. */
bool cgpu_ofi_shm_region(const void *name, char *path, size_t len);

/** Insert a peer's name into the address vector; @p addr receives its fi_addr_t. */
cgpu_status_t cgpu_ofi_insert(cgpu_ofi_t *o, const void *name, uint64_t *addr);

/**
 * Post a tagged send / receive. @p ctx points to CGPU_OFI_CTX_BYTES bytes the caller keeps
 * until the completion naming it has been read. @p desc is NULL or what cgpu_ofi_reg_cuda
 * returned. A receive from CGPU_OFI_ADDR_ANY accepts any sender.
 * @return CGPU_OK, CGPU_IN_PROGRESS when the provider is out of room (-FI_EAGAIN: read
 *         completions, then post again), or an error (logged).
 */
cgpu_status_t cgpu_ofi_tsend(cgpu_ofi_t *o, const void *buf, size_t len, void *desc, uint64_t dest,
                             uint64_t tag, void *ctx);
cgpu_status_t cgpu_ofi_trecv(cgpu_ofi_t *o, void *buf, size_t len, void *desc, uint64_t src,
                             uint64_t tag, void *ctx);

/**
 * Read up to @p max completions into @p out (error completions included, converted).
 * @return how many were read (0: none now), or a negative status when the queue itself
 *         failed.
 */
int cgpu_ofi_poll(cgpu_ofi_t *o, cgpu_ofi_cqe_t *out, int max);

/** Ask the provider to cancel the operation posted with @p ctx; if it can, the operation
 * then completes with cqe.canceled. */
void cgpu_ofi_cancel(cgpu_ofi_t *o, void *ctx);

/** Register CUDA device memory of @p device for sends and receives (FI_HMEM on; always,
 * since the descriptor is what marks the buffer as device memory). *mr and *desc stay NULL
 * without FI_HMEM. */
/** Whether the provider accepts a CUDA registration of @p buf (no warning when it does
 * not: CGPU_ERR_NOT_SUPPORTED or the converted error, logged at verbose 10). */
cgpu_status_t cgpu_ofi_probe_cuda(cgpu_ofi_t *o, void *buf, size_t len, int device);
cgpu_status_t cgpu_ofi_reg_cuda(cgpu_ofi_t *o, void *buf, size_t len, int device, void **mr,
                                void **desc);
/** Undo cgpu_ofi_reg_cuda (NULL: no-op). */
void cgpu_ofi_dereg(void *mr);

#endif /* CGPU_OFI_H */
