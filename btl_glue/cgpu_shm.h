/*
 * coll/gpu host transport: POSIX shared-memory segments between ranks of one node.
 *
 * A segment is created by its owner under a fresh random name (O_EXCL, mode 0600), attached
 * by its peers (names travel through the bootstrap) and unlinked as soon as every peer has
 * attached, or at once on any failure, so a crash after set-up leaves nothing in /dev/shm.
 * No file descriptor is kept open: the mapping alone holds the memory.
 */
#ifndef CGPU_SHM_H
#define CGPU_SHM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cgpu_status.h"

#define CGPU_SHM_NAME_MAX 64
/* Names drawn before giving up when each one drawn exists already. */
#define CGPU_SHM_NAME_TRIES 8

typedef struct cgpu_shm_seg {
    void *base;
    size_t size;
    char name[CGPU_SHM_NAME_MAX];
    bool owner;  /* created by this process (and so unlinked by it) */
    bool linked; /* name still present in /dev/shm */
} cgpu_shm_seg_t;

/**
 * Create, size (with real backing, so a full /dev/shm is an error here and never a
 * SIGBUS later) and map a new segment named "/cgpu-<uid>-<pid>-<16 random hex digits>",
 * created with O_EXCL and mode 0600. A name that exists already belongs to someone else and
 * is left alone: another is drawn, up to CGPU_SHM_NAME_TRIES names.
 *
 * @return CGPU_OK, CGPU_ERR_NO_MEMORY when /dev/shm is full, CGPU_ERR_SYSTEM otherwise
 *         (logged with errno, or with the last name when every name drawn was taken). On
 *         failure nothing is left behind.
 */
cgpu_status_t cgpu_shm_create(cgpu_shm_seg_t *seg, size_t size);

/** Map a peer's segment by name. The peer keeps ownership of the name. An object of
 * another owner than this process's user under the name is refused. */
cgpu_status_t cgpu_shm_attach(cgpu_shm_seg_t *seg, const char *name, size_t size);

/** Remove the name from /dev/shm if this process owns it. Idempotent. */
void cgpu_shm_unlink(cgpu_shm_seg_t *seg);

/**
 * Remove a peer's segment name, for a set-up that failed: the peer may be dead and unable
 * to remove it itself. Only for names a peer of the same set-up created and published;
 * a name already gone is not an error.
 */
void cgpu_shm_unlink_name(const char *name);

/** Unmap (and unlink if still linked and owned; unpinned first if pinned). Idempotent. */
void cgpu_shm_detach(cgpu_shm_seg_t *seg);

/**
 * Pin the mapping of @p seg for the GPU's copy engines (cudaHostRegister), so that copies
 * between it and device memory run as DMA; once per mapping in this process, whichever copy
 * of @p seg asks (a peer's segment is mapped once and shared by communicators), until
 * cgpu_shm_detach unmaps it. An error where no GPU takes it: copies still work, slower.
 */
cgpu_status_t cgpu_shm_pin(const cgpu_shm_seg_t *seg);

/** Mappings pinned now (tests). */
int cgpu_shm_pinned_count(void);

/** Number of segments this process has mapped right now (for RAS and tests). */
int cgpu_shm_mapped_count(void);
/** File descriptors the transport holds open now (each is closed once its segment is mapped). */
int cgpu_shm_open_fds(void);

/** Source of the random part of segment names. */
typedef uint64_t (*cgpu_shm_token_fn_t)(void);
/**
 * For tests: draw the random part of the next names from @p fn (NULL: the kernel's random
 * source again), so that a test can occupy the name a process is about to choose.
 */
void cgpu_shm_set_token_source(cgpu_shm_token_fn_t fn);

#endif /* CGPU_SHM_H */
