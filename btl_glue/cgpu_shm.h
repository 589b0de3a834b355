/*
 * coll/gpu host transport: POSIX shared-memory segments between ranks of one node.
 *
 * A segment is created by its owner, attached by its peers (names travel through the
 * bootstrap) and unlinked by its owner as soon as every peer has attached, so a crash
 * after set-up leaves nothing in /dev/shm. No file descriptor is kept open: the
 * mapping alone holds the memory.
 */
#ifndef CGPU_SHM_H
#define CGPU_SHM_H

#include <stdbool.h>
#include <stddef.h>

#include "cgpu_status.h"

#define CGPU_SHM_NAME_MAX 64

typedef struct cgpu_shm_seg {
    void *base;
    size_t size;
    char name[CGPU_SHM_NAME_MAX];
    bool owner;  /* created by this process (and so unlinked by it) */
    bool linked; /* name still present in /dev/shm */
} cgpu_shm_seg_t;

/**
 * Create, size (with real backing, so a full /dev/shm is an error here and never a
 * SIGBUS later) and map a new segment named "/cgpu-<pid>-<n>".
 *
 * @return CGPU_OK, CGPU_ERR_NO_MEMORY when /dev/shm is full, CGPU_ERR_SYSTEM otherwise
 *         (logged with errno). On failure nothing is left behind.
 */
cgpu_status_t cgpu_shm_create(cgpu_shm_seg_t *seg, size_t size);

/** Map a peer's segment by name. The peer keeps ownership of the name. */
cgpu_status_t cgpu_shm_attach(cgpu_shm_seg_t *seg, const char *name, size_t size);

/** Remove the name from /dev/shm if this process owns it. Idempotent. */
void cgpu_shm_unlink(cgpu_shm_seg_t *seg);

/** Unmap (and unlink if still linked and owned). Idempotent. */
void cgpu_shm_detach(cgpu_shm_seg_t *seg);

/** Number of segments this process has mapped right now (for RAS and tests). */
int cgpu_shm_mapped_count(void);
/** File descriptors the transport holds open now (each is closed once its segment is mapped). */
int cgpu_shm_open_fds(void);

#endif /* CGPU_SHM_H */
