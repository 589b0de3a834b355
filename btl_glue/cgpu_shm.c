/*
 * coll/gpu host transport: POSIX shared-memory segments.
 */
#define CGPU_LOG_SUBSYS CGPU_SUB_SHM
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cgpu_shm.h"
#include "cgpu_cuda.h"
#include "cgpu_log.h"

static atomic_int shm_mapped;
static atomic_int shm_fds; /* descriptors open right now (between shm_open and close) */

static void fd_close(int fd)
{
    close(fd);
    atomic_fetch_sub(&shm_fds, 1);
}
static atomic_uint shm_counter;
static _Atomic(cgpu_shm_token_fn_t) shm_token_fn;

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

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* 64 random bits for a name. The kernel's pool first; where it cannot answer at once (early
 * boot, a seccomp filter), the clock, the pid and a counter mixed: less unguessable, but a
 * guessed name still only costs a retry, never our data (O_EXCL). */
static uint64_t shm_token(void)
{
    const cgpu_shm_token_fn_t fn = atomic_load(&shm_token_fn);
    uint64_t t;

    if (NULL != fn) {
        return fn();
    }
    if ((ssize_t) sizeof(t) == getrandom(&t, sizeof(t), GRND_NONBLOCK)) {
        return t;
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return mix64((uint64_t) ts.tv_sec * 1000000000ull + (uint64_t) ts.tv_nsec) ^
           mix64(((uint64_t) getpid() << 32) | atomic_fetch_add(&shm_counter, 1));
}

void cgpu_shm_set_token_source(cgpu_shm_token_fn_t fn)
{
    atomic_store(&shm_token_fn, fn);
}

/*
 * Open a new segment name with O_EXCL, mode 0600. The name is
 * "/cgpu-<uid>-<pid>-<64 random bits in hex>": the uid and pid say whose it is (an
 * administrator can tell a left-over from a live job's), the random part makes it
 * unguessable, so no other user can claim our names in advance. A name someone else holds
 * is never unlinked (it is not ours, whatever it is called): another name is drawn, a few
 * times, then the caller is told. Peers learn the name through the set-up exchange, so it
 * need not be derivable from anything they know. Returns the descriptor, or -1 with errno.
 */
static int shm_open_new_name(cgpu_shm_seg_t *seg)
{
    int fd = -1, err = 0;

    for (int tries = 0; tries < CGPU_SHM_NAME_TRIES; ++tries) {
        int attempt = 0;
        snprintf(seg->name, sizeof(seg->name), "/cgpu-%u-%d-%016llx", (unsigned) geteuid(),
                 (int) getpid(), (unsigned long long) shm_token());
        do {
            fd = shm_open(seg->name, O_RDWR | O_CREAT | O_EXCL, 0600);
            err = errno;
        } while (fd < 0 && shm_should_retry(err, attempt++));
        if (fd >= 0 || EEXIST != err) {
            break;
        }
        cgpu_log(CGPU_LOG_INFO,
                 "shm: %s exists already (not ours: left untouched); drawing "
                 "another name",
                 seg->name);
    }
    if (fd < 0 && EEXIST == err) {
        cgpu_log(CGPU_LOG_WARN,
                 "shm: %d random segment names in a row were taken in /dev/shm (the last %s); "
                 "something creates names like ours. This communicator uses the fallback; "
                 "look for cgpu-* entries in /dev/shm that no job of yours made",
                 CGPU_SHM_NAME_TRIES, seg->name);
    } else if (fd < 0) {
        cgpu_log(CGPU_LOG_WARN, "shm: cannot create %s: %s", seg->name, strerror(err));
    }
    errno = err;
    return fd;
}

cgpu_status_t cgpu_shm_create(cgpu_shm_seg_t *seg, size_t size)
{
    int fd, rc;
    memset(seg, 0, sizeof(*seg));
    fd = shm_open_new_name(seg);
    if (fd < 0) {
        seg->name[0] = '\0';
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
                 "coll_gpu_alltoall_stage_bytes (coll_gpu_shared_stage_bytes where ranks share "
                 "a GPU) or enlarge /dev/shm",
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
    /* Our peers run as our user and create with O_EXCL, so an object of another owner under
     * the name is not theirs: never map it. */
    if (sb.st_uid != geteuid()) {
        cgpu_log(CGPU_LOG_WARN,
                 "shm: peer segment %s belongs to uid %u, not to this job's uid %u; "
                 "refused",
                 name, (unsigned) sb.st_uid, (unsigned) geteuid());
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

void cgpu_shm_unlink_name(const char *name)
{
    if (NULL != name && '/' == name[0] && 0 != shm_unlink(name) && ENOENT != errno) {
        cgpu_log(CGPU_LOG_INFO, "shm: cannot remove %s: %s", name, strerror(errno));
    }
}

/* The mappings pinned for the GPU (cgpu_shm_pin), by base address: a segment's copies share
 * the base, so the table, not the copy, knows. At most one entry per mapping; pinning and
 * unmapping are rare (a communicator's first staged call, its release), so a list under a
 * mutex will do. */
static pthread_mutex_t pin_lock = PTHREAD_MUTEX_INITIALIZER;
static void **pinned;
static int npinned, pinned_cap;
static atomic_int pinned_now; /* npinned, for readers that take no lock */

cgpu_status_t cgpu_shm_pin(const cgpu_shm_seg_t *seg)
{
    if (NULL == seg->base) {
        return CGPU_ERR_INVALID_ARG;
    }
    cgpu_status_t st = CGPU_OK;
    pthread_mutex_lock(&pin_lock);
    for (int i = 0; i < npinned; ++i) {
        if (pinned[i] == seg->base) {
            goto out;
        }
    }
    if (npinned == pinned_cap) {
        const int cap = pinned_cap > 0 ? 2 * pinned_cap : 16;
        void **grown = realloc(pinned, sizeof(*pinned) * (size_t) cap);
        if (NULL == grown) {
            st = CGPU_ERR_NO_MEMORY;
            goto out;
        }
        pinned = grown;
        pinned_cap = cap;
    }
    st = cgpu_cuda_host_register(seg->base, seg->size);
    if (CGPU_OK == st) {
        pinned[npinned++] = seg->base;
        atomic_store_explicit(&pinned_now, npinned, memory_order_relaxed);
    }
out:
    pthread_mutex_unlock(&pin_lock);
    return st;
}

int cgpu_shm_pinned_count(void)
{
    return atomic_load_explicit(&pinned_now, memory_order_relaxed);
}

/* Unpin @p base if it was pinned: the registration must go before the mapping does. */
static void unpin(void *base)
{
    pthread_mutex_lock(&pin_lock);
    for (int i = 0; i < npinned; ++i) {
        if (pinned[i] == base) {
            cgpu_cuda_host_unregister(base);
            pinned[i] = pinned[--npinned];
            atomic_store_explicit(&pinned_now, npinned, memory_order_relaxed);
            break;
        }
    }
    if (0 == npinned) {
        free(pinned);
        pinned = NULL;
        pinned_cap = 0;
    }
    pthread_mutex_unlock(&pin_lock);
}

void cgpu_shm_detach(cgpu_shm_seg_t *seg)
{
    cgpu_shm_unlink(seg);
    if (NULL != seg->base) {
        unpin(seg->base);
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
