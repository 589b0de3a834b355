/*
 * coll/gpu host transport: POSIX shared-memory segments.
 */
#define CGPU_LOG_SUBSYS CGPU_SUB_SHM
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cgpu_shm.h"
#include "cgpu_log.h"

static atomic_int shm_mapped;
static atomic_int shm_fds; /* descriptors open right now (between shm_open and close) */

static void fd_close(int fd)
{
    close(fd);
    atomic_fetch_sub(&shm_fds, 1);
}
static atomic_uint shm_counter;

/* Retry a transient failure (EAGAIN/EINTR/EMFILE from a busy system) a few times with
 * growing sleeps before giving up: set-up storms at scale hit these. */
static bool shm_should_retry(int err, int attempt)
{
    if (attempt >= 6 || (EAGAIN != err && EINTR != err)) {
        return false;
    }
    struct timespec ts = {0, 1000L * 1000L * (1L << attempt)}; /* 1 ms .. 32 ms */
    nanosleep(&ts, NULL);
    return true;
}

cgpu_status_t cgpu_shm_create(cgpu_shm_seg_t *seg, size_t size)
{
    int fd = -1, rc, attempt = 0;
    memset(seg, 0, sizeof(*seg));
    snprintf(seg->name, sizeof(seg->name), "/cgpu-%d-%u", (int) getpid(),
             atomic_fetch_add(&shm_counter, 1));
    bool stale_removed = false;
    do {
        fd = shm_open(seg->name, O_RDWR | O_CREAT | O_EXCL, 0600);
        if (fd < 0 && EEXIST == errno && !stale_removed) {
            /* the name carries our pid, so no live process made it: a process that had
             * our pid before died before unlinking it. Remove it and try again, once. */
            cgpu_log(CGPU_LOG_INFO, "shm: removing stale %s left by a dead process",
                     seg->name);
            stale_removed = true;
            (void) shm_unlink(seg->name);
            fd = shm_open(seg->name, O_RDWR | O_CREAT | O_EXCL, 0600);
        }
    } while (fd < 0 && shm_should_retry(errno, attempt++));
    if (fd < 0) {
        cgpu_log(CGPU_LOG_WARN, "shm: cannot create %s: %s", seg->name, strerror(errno));
        return CGPU_ERR_SYSTEM;
    }
    atomic_fetch_add(&shm_fds, 1);
    seg->owner = true;
    seg->linked = true;
    if (0 != ftruncate(fd, (off_t) size)) {
        cgpu_log(CGPU_LOG_WARN, "shm: cannot size %s to %zu bytes: %s", seg->name, size,
                 strerror(errno));
        goto out_unlink;
    }
    /* Reserve the pages now: a /dev/shm too small must fail here, not fault later. */
    rc = posix_fallocate(fd, 0, (off_t) size);
    if (0 != rc) {
        cgpu_log(CGPU_LOG_WARN,
                 "shm: /dev/shm has no room for %zu bytes (%s); lower coll_gpu_slot_bytes / "
                 "coll_gpu_alltoall_stage_bytes or enlarge /dev/shm",
                 size, strerror(rc));
        fd_close(fd);
        shm_unlink(seg->name);
        seg->linked = false;
        return CGPU_ERR_NO_MEMORY;
    }
    seg->base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (MAP_FAILED == seg->base) {
        seg->base = NULL;
        cgpu_log(CGPU_LOG_WARN, "shm: cannot map %s: %s", seg->name, strerror(errno));
        goto out_unlink;
    }
    fd_close(fd);
    seg->size = size;
    atomic_fetch_add(&shm_mapped, 1);
    return CGPU_OK;

out_unlink:
    fd_close(fd);
    shm_unlink(seg->name);
    seg->linked = false;
    return CGPU_ERR_SYSTEM;
}

cgpu_status_t cgpu_shm_attach(cgpu_shm_seg_t *seg, const char *name, size_t size)
{
    int fd, attempt = 0;
    memset(seg, 0, sizeof(*seg));
    snprintf(seg->name, sizeof(seg->name), "%s", name);
    do {
        fd = shm_open(seg->name, O_RDWR, 0600);
    } while (fd < 0 && shm_should_retry(errno, attempt++));
    if (fd < 0) {
        cgpu_log(CGPU_LOG_WARN, "shm: cannot open peer segment %s: %s", name, strerror(errno));
        return CGPU_ERR_SYSTEM;
    }
    atomic_fetch_add(&shm_fds, 1);
    struct stat sb;
    if (0 != fstat(fd, &sb) || (size_t) sb.st_size < size) {
        cgpu_log(CGPU_LOG_WARN, "shm: peer segment %s is smaller than %zu bytes", name, size);
        fd_close(fd);
        return CGPU_ERR_SYSTEM;
    }
    seg->base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    fd_close(fd);
    if (MAP_FAILED == seg->base) {
        seg->base = NULL;
        cgpu_log(CGPU_LOG_WARN, "shm: cannot map peer segment %s: %s", name, strerror(errno));
        return CGPU_ERR_SYSTEM;
    }
    seg->size = size;
    atomic_fetch_add(&shm_mapped, 1);
    return CGPU_OK;
}

void cgpu_shm_unlink(cgpu_shm_seg_t *seg)
{
    if (seg->owner && seg->linked) {
        shm_unlink(seg->name);
        seg->linked = false;
    }
}

void cgpu_shm_detach(cgpu_shm_seg_t *seg)
{
    cgpu_shm_unlink(seg);
    if (NULL != seg->base) {
        munmap(seg->base, seg->size);
        seg->base = NULL;
        atomic_fetch_sub(&shm_mapped, 1);
    }
}

int cgpu_shm_open_fds(void)
{
    return atomic_load_explicit(&shm_fds, memory_order_relaxed);
}

int cgpu_shm_mapped_count(void)
{
    return atomic_load_explicit(&shm_mapped, memory_order_relaxed);
}
