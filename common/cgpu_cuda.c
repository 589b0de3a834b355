/*
 * coll/gpu base: the CUDA runtime wrapper (devices, memory kinds, streams and events,
 * copies, IPC handles). Everything above reaches CUDA through here, so CUDA errors become
 * cgpu_status_t in one place, and a build without the toolkit gets the "no device"
 * answers from the stubs at the end of this file.
 */
#define CGPU_LOG_SUBSYS CGPU_SUB_CUDA
#include "cgpu_cuda.h"
#include "cgpu_clock.h"
#include "cgpu_config.h"
#include "cgpu_log.h"
#include "cgpu_thread.h"

#include <pthread.h>
#include <stdatomic.h>

/* coll_gpu_cuda_wait_polls as resolved for the thread level (cgpu_cuda_set_wait_polls) */
static atomic_int wait_polls = -1;

void cgpu_cuda_set_wait_polls(int polls)
{
    atomic_store_explicit(&wait_polls, polls, memory_order_relaxed);
}

/* Collectives in flight (readers, cgpu_cuda_inflight_begin/end) against a communicator's
 * set-up and the deferred releases (writers). Plain threads, so the host-only build (CI)
 * tests the set-up's wait too. */
static pthread_rwlock_t inflight = PTHREAD_RWLOCK_INITIALIZER;

void cgpu_cuda_inflight_begin(void)
{
    (void) pthread_rwlock_rdlock(&inflight);
}

static void (*setup_hook)(void);
static int setup_wait_ms = -1; /* set once, at engine init: < 0 for ever, 0 never */

void cgpu_cuda_set_setup_hook(void (*fn)(void))
{
    setup_hook = fn;
}

void cgpu_cuda_set_setup_wait(int ms)
{
    setup_wait_ms = ms;
}

/* The wait is bounded because it can close a cycle across ranks: under
 * MPI_THREAD_MULTIPLE one thread's set-up waits here for another thread's kernel, that
 * kernel for a peer rank, and the peer's matching thread for its own set-up, which waits
 * for a kernel of a third communicator the same way (rank-dependent interleavings of the
 * threads; seen as kernels timing out inside MPI_Comm_split). Past the bound the set-up
 * goes ahead beside the kernels in flight, as it always does with the wait off. Readers
 * are not held back by a waiting writer (glibc's default rwlock prefers readers), so
 * collectives keep starting meanwhile. */
bool cgpu_cuda_setup_begin(void)
{
    if (0 == setup_wait_ms) {
        return false;
    }
    if (setup_wait_ms < 0) {
        (void) pthread_rwlock_wrlock(&inflight);
    } else {
        const struct timespec until = cgpu_deadline_after_ns((uint64_t) setup_wait_ms * 1000000ull);
        if (0 != pthread_rwlock_timedwrlock(&inflight, &until)) {
            cgpu_log(CGPU_LOG_INFO,
                     "cuda: set-up goes ahead beside collectives in flight (waited %d ms)",
                     setup_wait_ms);
            return false;
        }
    }
    if (NULL != setup_hook) {
        setup_hook();
    }
    return true;
}

void cgpu_cuda_setup_end(bool held)
{
    if (held) {
        (void) pthread_rwlock_unlock(&inflight);
    }
}

#ifdef CGPU_HAVE_CUDA

#include <cuda.h>
#include <cuda_runtime.h>
#include <dirent.h>
#include <dlfcn.h>
#include <stdio.h>
#include <unistd.h>
#include <stdint.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(sizeof(cudaIpcMemHandle_t) == CGPU_CUDA_IPC_HANDLE_BYTES, "IPC handle size");

static pthread_once_t cuda_once = PTHREAD_ONCE_INIT;
static bool cuda_ok;

static void note_ours_made(void);
static void *driver_sym(const char *name);

/* The driver's pointer query: unlike the runtime's, it makes no context. A process whose
 * first collective runs on host buffers before it chose its GPU (Open MPI's allgather inside
 * MPI_Comm_split_type, the usual way to find the node-local rank) must not get a context
 * on device 0 from us: it would hold GPU memory there for the process's life. */
typedef CUresult (*ptr_attrs_fn)(unsigned int, CUpointer_attribute *, void **, CUdeviceptr);
static ptr_attrs_fn ptr_attrs;

/* Our first CUDA use (under coll_gpu_backend auto, the first collective's pointer query) */
static void cuda_probe(void)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    cuda_ok = (cudaSuccess == e && n > 0);
    if (cudaSuccess != e) {
        cgpu_log(CGPU_LOG_INFO, "cuda: no usable CUDA runtime/driver (%s)", cudaGetErrorString(e));
        (void) cudaGetLastError();
    }
    if (cuda_ok) {
        ptr_attrs = (ptr_attrs_fn) driver_sym("cuPointerGetAttributes");
        if (NULL == ptr_attrs) {
            note_ours_made(); /* the runtime's query will make one: before it can */
        }
    }
}

bool cgpu_cuda_available(void)
{
    pthread_once(&cuda_once, cuda_probe);
    return cuda_ok;
}

/* The driver's files for its devices: /dev/nvidia0, 1, ... (what a container is given) or,
 * on the host, /proc/driver/nvidia/gpus/<bus id>. */
static bool nvidia_device_files(void)
{
    char path[32];
    for (int i = 0; i < 64; ++i) {
        snprintf(path, sizeof(path), "/dev/nvidia%d", i);
        if (0 == access(path, F_OK)) {
            return true;
        }
    }
    DIR *d = opendir("/proc/driver/nvidia/gpus");
    bool any = false;
    for (struct dirent *e = NULL == d ? NULL : readdir(d); NULL != e && !any; e = readdir(d)) {
        any = '.' != e->d_name[0];
    }
    if (NULL != d) {
        closedir(d);
    }
    return any;
}

static pthread_once_t files_once = PTHREAD_ONCE_INIT;
static bool files_seen;

static void look_for_files(void)
{
    files_seen = nvidia_device_files();
}

bool cgpu_cuda_present(void)
{
    /* asked by every communicator's selection: the files are looked for once a process */
    pthread_once(&files_once, look_for_files);
    return files_seen || cgpu_cuda_available();
}

cgpu_status_t cgpu_cuda_check(int err, const char *what)
{
    if (0 == err) {
        return CGPU_OK;
    }
    cgpu_log(CGPU_LOG_WARN, "cuda: %s failed: %s", what, cudaGetErrorString((cudaError_t) err));
    return CGPU_ERR_DEVICE;
}

cgpu_mem_kind_t cgpu_cuda_mem_kind(const void *ptr, int *device)
{
    *device = -1;
    if (NULL == ptr || !cgpu_cuda_available()) {
        return CGPU_MEM_HOST;
    }
    if (NULL != ptr_attrs) {
        CUpointer_attribute what[3] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                       CU_POINTER_ATTRIBUTE_IS_MANAGED,
                                       CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL};
        unsigned int type = 0, managed = 0;
        int ordinal = -1;
        void *data[3] = {&type, &managed, &ordinal};
        /* memory CUDA does not know answers CUDA_SUCCESS with the values left at zero */
        if (CUDA_SUCCESS != ptr_attrs(3, what, data, (CUdeviceptr) (uintptr_t) ptr)) {
            return CGPU_MEM_HOST;
        }
        if (0 != managed) {
            *device = ordinal;
            return CGPU_MEM_MANAGED;
        }
        if (CU_MEMORYTYPE_DEVICE == type) {
            *device = ordinal;
            return CGPU_MEM_DEVICE;
        }
        return CGPU_MEM_HOST; /* pinned or registered host memory too, as the runtime says */
    }
    struct cudaPointerAttributes at;
    cudaError_t e = cudaPointerGetAttributes(&at, ptr);
    if (cudaSuccess != e) {
        (void) cudaGetLastError(); /* an unknown host pointer is not an error for us */
        return CGPU_MEM_HOST;
    }
    switch (at.type) {
    case cudaMemoryTypeDevice:
        *device = at.device;
        return CGPU_MEM_DEVICE;
    case cudaMemoryTypeManaged:
        *device = at.device;
        return CGPU_MEM_MANAGED;
    default:
        return CGPU_MEM_HOST;
    }
}

int cgpu_cuda_current_device(void)
{
    int d = -1;
    if (!cgpu_cuda_available() || cudaSuccess != cudaGetDevice(&d)) {
        (void) cudaGetLastError();
        return -1;
    }
    return d;
}

int cgpu_cuda_mps_enabled(int device)
{
    /* cudaDevAttrMpsEnabled (133) by number: a runtime older than the attribute answers
     * with an error, read as unknown */
    int v = -1;
    if (!cgpu_cuda_available() ||
        cudaSuccess != cudaDeviceGetAttribute(&v, (enum cudaDeviceAttr) 133, device)) {
        (void) cudaGetLastError();
        return -1;
    }
    return 0 != v;
}

int cgpu_cuda_device_sms(int device)
{
    int v = 0;
    if (!cgpu_cuda_available() ||
        cudaSuccess != cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, device)) {
        (void) cudaGetLastError();
        return 0;
    }
    return v;
}

cgpu_status_t cgpu_cuda_set_device(int device)
{
    return cgpu_cuda_check((int) cudaSetDevice(device), "cudaSetDevice");
}

/*
 * Releases that synchronize the whole device (cudaFree, cudaFreeHost,
 * cudaIpcCloseMemHandle) must never wait for a collective kernel of this process: that
 * kernel may be waiting for a peer whose own thread is blocked the same way, and the two
 * processes would wait for each other forever. Collective launches hold `inflight` for
 * reading from launch to completion; a release takes it for writing only with trylock,
 * and otherwise waits in `pending` until a moment when no collective is in flight (the
 * end of the next one, or finalize). The lock is never held across a call into MPI.
 */
enum { REL_DEVICE = 0, REL_HOST = 1, REL_IPC = 2 };
typedef struct rel {
    int kind;
    int device;
    void *ptr;
} rel_t;
static pthread_mutex_t pending_lock = PTHREAD_MUTEX_INITIALIZER;
static rel_t *pending;
static size_t npending, pending_cap;

static void release_now(const rel_t *r)
{
    int prev = -1;
    (void) cudaGetDevice(&prev);
    if (r->device >= 0 && r->device != prev) {
        (void) cudaSetDevice(r->device);
    }
    switch (r->kind) {
    case REL_DEVICE:
        (void) cudaFree(r->ptr);
        break;
    case REL_HOST:
        (void) cudaFreeHost(r->ptr);
        break;
    default:
        (void) cudaIpcCloseMemHandle(r->ptr);
        break;
    }
    (void) cudaGetLastError();
    if (r->device >= 0 && r->device != prev && prev >= 0) {
        (void) cudaSetDevice(prev);
    }
}

/* Release what is pending if no collective is in flight (or wait for that: force). */
static void drain(bool force)
{
    if (0 == npending) { /* racy peek: a miss is caught at the next call */
        return;
    }
    if (force ? 0 != pthread_rwlock_wrlock(&inflight) : 0 != pthread_rwlock_trywrlock(&inflight)) {
        return;
    }
    pthread_mutex_lock(&pending_lock);
    rel_t *list = pending;
    size_t n = npending;
    pending = NULL;
    npending = pending_cap = 0;
    pthread_mutex_unlock(&pending_lock);
    for (size_t i = 0; i < n; ++i) {
        release_now(&list[i]);
    }
    free(list);
    pthread_rwlock_unlock(&inflight);
}

static void release(int kind, void *ptr)
{
    if (NULL == ptr) {
        return;
    }
    rel_t r = {.kind = kind, .device = -1, .ptr = ptr};
    (void) cudaGetDevice(&r.device);
    if (0 == pthread_rwlock_trywrlock(&inflight)) {
        release_now(&r);
        pthread_rwlock_unlock(&inflight);
        return;
    }
    pthread_mutex_lock(&pending_lock);
    if (npending == pending_cap) {
        size_t cap = pending_cap ? 2 * pending_cap : 16;
        rel_t *grown = realloc(pending, cap * sizeof(*grown));
        if (NULL == grown) { /* cannot defer: leak rather than risk a hang */
            pthread_mutex_unlock(&pending_lock);
            cgpu_log(CGPU_LOG_WARN, "cuda: out of memory deferring a release; %p is leaked", ptr);
            return;
        }
        pending = grown;
        pending_cap = cap;
    }
    pending[npending++] = r;
    pthread_mutex_unlock(&pending_lock);
}

void cgpu_cuda_inflight_end(void)
{
    (void) pthread_rwlock_unlock(&inflight);
    drain(false);
}

void cgpu_cuda_release_pending(void)
{
    drain(true);
}

cgpu_status_t cgpu_cuda_malloc(void **ptr, size_t bytes, void *zero_on)
{
    cudaError_t e = cudaMalloc(ptr, bytes);
    if (cudaSuccess != e) {
        *ptr = NULL;
        cgpu_log(CGPU_LOG_WARN, "cuda: cudaMalloc of %zu bytes failed: %s", bytes,
                 cudaGetErrorString(e));
        (void) cudaGetLastError();
        return CGPU_ERR_NO_MEMORY;
    }
    if (NULL == zero_on) {
        return CGPU_OK;
    }
    /* zeroed before returning (peers write counters into this memory as soon as they map
     * it), on the caller's stream: a device-wide synchronize could wait for another
     * communicator's kernel, which may be waiting for us */
    e = cudaMemsetAsync(*ptr, 0, bytes, (cudaStream_t) zero_on);
    if (cudaSuccess == e) {
        e = cudaStreamSynchronize((cudaStream_t) zero_on);
    }
    if (cudaSuccess != e) {
        release(REL_DEVICE, *ptr);
        *ptr = NULL;
        return cgpu_cuda_check((int) e, "cudaMemsetAsync");
    }
    return CGPU_OK;
}

void cgpu_cuda_free(void *ptr)
{
    release(REL_DEVICE, ptr);
}

cgpu_status_t cgpu_cuda_stream_create(void **stream, bool blocking)
{
    cudaStream_t s = NULL;
    /* non-blocking: no implicit ordering with the legacy default stream, whose
     * synchronous calls (an application's cudaMemcpy on one thread) would otherwise wait
     * for our kernel, which may wait for a peer that waits for that thread. Blocking is
     * safe only where no other thread can be inside one of our collectives meanwhile. */
    cgpu_status_t st = cgpu_cuda_check(
        (int) cudaStreamCreateWithFlags(&s, blocking ? cudaStreamDefault : cudaStreamNonBlocking),
        "cudaStreamCreate");
    *stream = (void *) s;
    return st;
}

void cgpu_cuda_stream_destroy(void *stream)
{
    if (NULL != stream) {
        (void) cudaStreamDestroy((cudaStream_t) stream);
    }
}

/* Polls the stream. With polls >= 0, past that many polls it gives the core away between
 * them: with more threads than cores (MPI_THREAD_MULTIPLE under a one-core binding) a
 * spinning wait keeps the thread that would launch the peer kernel ours is waiting for off
 * the core for a whole time slice per collective. -1 spins. With @p progress, a wait that
 * lasts (past 256 polls, hundreds of microseconds) runs the MPI library's progress every
 * 8th poll: a peer blocked in a receive that this rank must push would wait on us for ever
 * (cudaStreamSynchronize, which spins as fast, cannot make that progress and is no
 * faster). */
static cgpu_status_t stream_wait(void *stream, bool progress)
{
    int polls = atomic_load_explicit(&wait_polls, memory_order_relaxed);
    if (polls < 0 && !cgpu_thread_may_call_mpi()) {
        /* a non-blocking collective's worker: bound to one core it shares it with the
         * application's thread, so it gives the core away at every poll (each poll, a
         * cudaStreamQuery, costs over a microsecond while a kernel runs: 32 of them hold the
         * core for the whole collective and leave the application no overlap); with a
         * core of its own, 32 */
        polls = cgpu_thread_worker_shares_cpu() ? 0 : 32;
    }
    if (polls < 0 && !progress) {
        return cgpu_cuda_check((int) cudaStreamSynchronize((cudaStream_t) stream),
                               "collective on the GPU");
    }
    for (unsigned it = 0;; ++it) {
        cudaError_t e = cudaStreamQuery((cudaStream_t) stream);
        if (cudaErrorNotReady != e) {
            return cgpu_cuda_check((int) e, "collective on the GPU");
        }
        if (progress) {
            cgpu_progress_poll(it, 256);
        }
        if (polls >= 0 && it >= (unsigned) polls) {
            sched_yield();
        } else {
            cgpu_cpu_relax();
        }
    }
}

cgpu_status_t cgpu_cuda_stream_sync(void *stream)
{
    return stream_wait(stream, false);
}

cgpu_status_t cgpu_cuda_stream_wait_collective(void *stream)
{
    return stream_wait(stream, true);
}

cgpu_status_t cgpu_cuda_event_create(void **ev)
{
    cudaEvent_t e = NULL;
    cgpu_status_t st = cgpu_cuda_check((int) cudaEventCreateWithFlags(&e, cudaEventDisableTiming),
                                       "cudaEventCreate");
    *ev = (void *) e;
    return st;
}

void cgpu_cuda_event_destroy(void *ev)
{
    if (NULL != ev) {
        (void) cudaEventDestroy((cudaEvent_t) ev);
    }
}

cgpu_status_t cgpu_cuda_stream_after(void *stream, void *ev, void *other)
{
    cudaError_t e = cudaEventRecord((cudaEvent_t) ev, (cudaStream_t) other);
    if (cudaSuccess == e) {
        e = cudaStreamWaitEvent((cudaStream_t) stream, (cudaEvent_t) ev, 0);
    }
    return cgpu_cuda_check((int) e, "ordering two streams");
}

/* An event recorded on the legacy default stream completes after everything enqueued
 * before it there and on every blocking stream (per-thread default streams included);
 * our stream then waits for it on the device. The host never waits, and the legacy
 * stream never waits for ours, so no cycle through one of our kernels can form. Querying
 * the default streams first, to skip the event when they are idle, costs more (about 3 us
 * a call against 1 us for the event). */
cgpu_status_t cgpu_cuda_stream_after_default(void *stream, void *ev)
{
    return cgpu_cuda_stream_after(stream, ev, (void *) cudaStreamLegacy);
}

cgpu_status_t cgpu_cuda_copy_async(void *dst, const void *src, size_t bytes, void *stream)
{
    if (0 == bytes) {
        return CGPU_OK;
    }
    return cgpu_cuda_check(
        (int) cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, (cudaStream_t) stream),
        "cudaMemcpyAsync");
}

cgpu_status_t cgpu_cuda_memset_async(void *dst, int v, size_t bytes, void *stream)
{
    if (0 == bytes) {
        return CGPU_OK;
    }
    return cgpu_cuda_check((int) cudaMemsetAsync(dst, v, bytes, (cudaStream_t) stream),
                           "cudaMemsetAsync");
}

static cudaError_t copy_rows(const cgpu_copy_t *c, cudaStream_t stream)
{
    return c->rows > 1 ? cudaMemcpy2DAsync(c->dst, c->pitch, c->src, c->pitch, c->bytes, c->rows,
                                           cudaMemcpyDefault, stream)
                       : cudaMemcpyAsync(c->dst, c->src, c->bytes, cudaMemcpyDefault, stream);
}

cgpu_status_t cgpu_cuda_copy_rows_async(const cgpu_copy_t *c, void *stream)
{
    if (0 == c->bytes) {
        return CGPU_OK;
    }
    return cgpu_cuda_check((int) copy_rows(c, (cudaStream_t) stream), "cudaMemcpy2DAsync");
}

/* The copies go on the legacy stream, as cudaMemcpy's would. A device-to-device copy (and
 * the DMA of a pageable host-to-device one) can still be in flight when the call returns:
 * a copy engine or another stream reading the target next (the proxy's staging) could see
 * the old bytes (seen on one H200 shared by the ranks: blocks of an allgather across fake
 * nodes wrong). So one event recorded behind the last copy is waited for; it waits for
 * nothing the copies themselves did not wait for. */
static cudaError_t legacy_wait(cudaError_t e)
{
    static __thread cudaEvent_t ev;
    static __thread int ev_dev = -1;
    int dev = -1;
    if (cudaSuccess == e) {
        e = cudaGetDevice(&dev);
    }
    if (cudaSuccess == e && dev != ev_dev) {
        if (ev_dev >= 0) {
            (void) cudaEventDestroy(ev); /* made on another device, which is still current */
        }
        ev_dev = -1;
        e = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
        ev_dev = cudaSuccess == e ? dev : -1;
    }
    if (cudaSuccess == e) {
        e = cudaEventRecord(ev, cudaStreamLegacy);
    }
    if (cudaSuccess == e) {
        e = cudaEventSynchronize(ev);
    }
    return e;
}

static atomic_bool time_sliced;

void cgpu_cuda_set_time_sliced(void)
{
    atomic_store_explicit(&time_sliced, true, memory_order_relaxed);
}

bool cgpu_cuda_time_sliced(void)
{
    return atomic_load_explicit(&time_sliced, memory_order_relaxed);
}

/* cuStreamBatchMemOp from the libcuda the runtime has loaded (the _v2 entry point of CUDA
 * 11.7 and later drivers, which the header's name maps to) */
typedef CUresult (*batch_mem_op_fn)(CUstream, unsigned int, CUstreamBatchMemOpParams *,
                                    unsigned int);
static batch_mem_op_fn batch_mem_op;
static pthread_once_t batch_mem_op_once = PTHREAD_ONCE_INIT;

/* A driver entry point from the libcuda the runtime has loaded, or NULL */
static void *driver_sym(const char *name)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    return NULL == lib ? NULL : dlsym(lib, name);
}

static void find_batch_mem_op(void)
{
    batch_mem_op = (batch_mem_op_fn) driver_sym("cuStreamBatchMemOp_v2");
}

/* cuDeviceGet and cuDevicePrimaryCtxGetState from the libcuda the runtime has loaded: the
 * runtime cannot tell whether a device's primary context is active without making it so */
typedef CUresult (*device_get_fn)(CUdevice *, int);
typedef CUresult (*ctx_state_fn)(CUdevice, unsigned int *, int *);
typedef CUresult (*ctx_current_fn)(CUcontext *);
typedef CUresult (*ctx_device_fn)(CUdevice *);
static device_get_fn device_get;
static ctx_state_fn ctx_state;
static ctx_current_fn ctx_current;
static ctx_device_fn ctx_device;
static pthread_once_t ctx_state_once = PTHREAD_ONCE_INIT;

static void find_ctx_state(void)
{
    device_get = (device_get_fn) driver_sym("cuDeviceGet");
    ctx_state = (ctx_state_fn) driver_sym("cuDevicePrimaryCtxGetState");
    ctx_current = (ctx_current_fn) driver_sym("cuCtxGetCurrent");
    ctx_device = (ctx_device_fn) driver_sym("cuCtxGetDevice");
}

/* Whether the calling thread has a context of its own current on @p device: one the
 * application made with the driver API (cuCtxCreate) is no primary context */
static bool current_ctx_on(int device)
{
    CUcontext c = NULL;
    CUdevice d, mine;
    return NULL != ctx_current && NULL != ctx_device && CUDA_SUCCESS == ctx_current(&c) &&
           NULL != c && CUDA_SUCCESS == ctx_device(&mine) &&
           CUDA_SUCCESS == device_get(&d, device) && d == mine;
}

/* 1: the primary context of @p device is active; 0: not; -1: unknown */
static int ctx_active(int device)
{
    pthread_once(&ctx_state_once, find_ctx_state);
    CUdevice d;
    unsigned int flags = 0;
    int active = 0;
    if (device < 0 || NULL == device_get || NULL == ctx_state ||
        CUDA_SUCCESS != device_get(&d, device) || CUDA_SUCCESS != ctx_state(d, &flags, &active)) {
        return -1;
    }
    return active ? 1 : 0;
}

/* The device whose primary context our own calls made, or -1: where the driver lacks
 * cuPointerGetAttributes, the current device if its context was not active at our first
 * CUDA use (the runtime's pointer query makes it then: device 0 where the application has
 * not chosen yet). Noted once, in cuda_probe. */
static int ours_made = -1;

static void note_ours_made(void)
{
    int d = -1;
    if (cudaSuccess != cudaGetDevice(&d)) {
        (void) cudaGetLastError();
        return;
    }
    if (0 == ctx_active(d)) {
        ours_made = d;
    }
}

int cgpu_cuda_device_in_use(int device)
{
    if (device < 0 || !cgpu_cuda_available()) {
        return -1;
    }
    const int active = ctx_active(device);
    if (0 == active && current_ctx_on(device)) {
        return 1;
    }
    return active <= 0 ? active : device == ours_made ? 0 : 1;
}

/* A write of at most CGPU_CUDA_WRITE_OPS_MAX bytes as stream memory operations on @p stream
 * (8- or 4-byte words; the front end runs them, about 7 us for one word and 1.2 more a
 * word). cudaErrorNotSupported, nothing queued, where @p dst or @p bytes is not 4-byte
 * aligned or the driver lacks the call. */
static cudaError_t enqueue_write_ops(void *dst, const void *src, size_t bytes, cudaStream_t stream)
{
    const uintptr_t d = (uintptr_t) dst;
    const size_t w = 0 == ((d | bytes) & 7) ? 8 : 4;
    if (0 == bytes || bytes > CGPU_CUDA_WRITE_OPS_MAX || 0 != ((d | bytes) & 3)) {
        return cudaErrorNotSupported;
    }
    pthread_once(&batch_mem_op_once, find_batch_mem_op);
    if (NULL == batch_mem_op) {
        return cudaErrorNotSupported;
    }
    CUstreamBatchMemOpParams ops[CGPU_CUDA_WRITE_OPS_MAX / 4];
    const unsigned n = (unsigned) (bytes / w);
    for (unsigned i = 0; i < n; ++i) {
        memset(&ops[i], 0, sizeof(ops[i]));
        ops[i].writeValue.address = (CUdeviceptr) (d + (uintptr_t) i * w);
        if (8 == w) {
            ops[i].operation = CU_STREAM_MEM_OP_WRITE_VALUE_64;
            memcpy(&ops[i].writeValue.value64, (const char *) src + (size_t) i * w, 8);
        } else {
            ops[i].operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
            memcpy(&ops[i].writeValue.value, (const char *) src + (size_t) i * w, 4);
        }
    }
    return CUDA_SUCCESS == batch_mem_op((CUstream) stream, n, ops, 0) ? cudaSuccess
                                                                      : cudaErrorUnknown;
}

/* One host-to-device copy in a form a copy engine takes (see cgpu_cuda_copy_to_device),
 * on @p stream: up to CGPU_CUDA_WRITE_OPS_MAX aligned bytes as stream writes where @p ops
 * (the destination is device memory), a run under CGPU_CUDA_SLICED_ROWS_MAX as two rows of
 * half of it, and an odd last byte with the one before it as two rows of one byte (that
 * byte is written twice, with the same value, in stream order). */
static cudaError_t enqueue_to_device(const cgpu_copy_t *c, bool ops, cudaStream_t stream)
{
    if (c->rows > 1 || c->bytes < 2 || c->bytes > CGPU_CUDA_SLICED_ROWS_MAX) {
        return c->bytes > 0 ? copy_rows(c, stream) : cudaSuccess;
    }
    if (ops && cudaSuccess == enqueue_write_ops(c->dst, c->src, c->bytes, stream)) {
        return cudaSuccess;
    }
    const size_t half = c->bytes / 2;
    cudaError_t e =
        cudaMemcpy2DAsync(c->dst, half, c->src, half, half, 2, cudaMemcpyDefault, stream);
    if (cudaSuccess == e && 0 != (c->bytes & 1)) {
        e = cudaMemcpy2DAsync((char *) c->dst + c->bytes - 2, 1,
                              (const char *) c->src + c->bytes - 2, 1, 1, 2, cudaMemcpyDefault,
                              stream);
    }
    return e;
}

/* The @p n copies of @p c queued on the legacy stream, in the copy-engine forms where
 * @p to_device, then one wait for all of them. */
static cgpu_status_t queue_and_wait(const cgpu_copy_t *c, int n, bool to_device)
{
    cudaError_t e = cudaSuccess;
    int queued = 0;
    for (int i = 0; i < n && cudaSuccess == e; ++i) {
        if (c[i].bytes > 0) {
            e = to_device ? enqueue_to_device(&c[i], true, cudaStreamLegacy)
                          : copy_rows(&c[i], cudaStreamLegacy);
            ++queued;
        }
    }
    if (0 == queued) {
        return CGPU_OK;
    }
    return cgpu_cuda_check((int) legacy_wait(e), to_device ? "cudaMemcpy2DAsync" : "cudaMemcpy");
}

cgpu_status_t cgpu_cuda_copy_many(const cgpu_copy_t *c, int n)
{
    return queue_and_wait(c, n, false);
}

cgpu_status_t cgpu_cuda_copy_to_device(const cgpu_copy_t *c, int n)
{
    return queue_and_wait(c, n, true);
}

cgpu_status_t cgpu_cuda_copy_engine_async(void *dst, const void *src, size_t bytes, void *stream)
{
    const cgpu_copy_t c = {.dst = dst, .src = src, .bytes = bytes};
    return cgpu_cuda_check((int) enqueue_to_device(&c, false, (cudaStream_t) stream),
                           "cudaMemcpy2DAsync");
}

cgpu_status_t cgpu_cuda_copy(void *dst, const void *src, size_t bytes)
{
    const cgpu_copy_t c = {.dst = dst, .src = src, .bytes = bytes};
    return cgpu_cuda_copy_many(&c, 1);
}

cgpu_status_t cgpu_cuda_host_alloc_mapped(void **host, void **dev, size_t bytes)
{
    *host = *dev = NULL;
    cudaError_t e = cudaHostAlloc(host, bytes, cudaHostAllocMapped);
    if (cudaSuccess == e) {
        memset(*host, 0, bytes);
        e = cudaHostGetDevicePointer(dev, *host, 0);
    }
    if (cudaSuccess != e) {
        if (NULL != *host) {
            cudaFreeHost(*host);
        }
        *host = *dev = NULL;
        return cgpu_cuda_check((int) e, "cudaHostAlloc(mapped)");
    }
    return CGPU_OK;
}

void cgpu_cuda_host_free(void *host)
{
    release(REL_HOST, host);
}

cgpu_status_t cgpu_cuda_ipc_export(void *dptr, void *handle)
{
    cudaIpcMemHandle_t h;
    cgpu_status_t st = cgpu_cuda_check((int) cudaIpcGetMemHandle(&h, dptr), "cudaIpcGetMemHandle");
    if (CGPU_OK == st) {
        memcpy(handle, &h, sizeof(h));
    }
    return st;
}

/* The allocation that holds a pointer: the runtime has no call for it, the driver has
 * (cuMemGetAddressRange), found in the libcuda the runtime has loaded. */
typedef int (*ptr_attr_fn)(void *data, int attribute, unsigned long long p);
static ptr_attr_fn ptr_attr;
static pthread_once_t ptr_attr_once = PTHREAD_ONCE_INIT;
enum { CGPU_CU_ATTR_BUFFER_ID = 7, CGPU_CU_ATTR_RANGE_START = 11 }; /* CUpointer_attribute */

static void find_ptr_attr(void)
{
    ptr_attr = (ptr_attr_fn) driver_sym("cuPointerGetAttribute");
}

cgpu_status_t cgpu_cuda_ipc_export_range(const void *p, void *handle, size_t *offset, uint64_t *id)
{
    pthread_once(&ptr_attr_once, find_ptr_attr);
    unsigned long long base = 0, buf_id = 0;
    const unsigned long long dp = (unsigned long long) (uintptr_t) p;
    if (NULL == ptr_attr || 0 != ptr_attr(&base, CGPU_CU_ATTR_RANGE_START, dp) ||
        0 != ptr_attr(&buf_id, CGPU_CU_ATTR_BUFFER_ID, dp)) {
        return CGPU_ERR_NOT_SUPPORTED;
    }
    *id = buf_id;
    cudaIpcMemHandle_t h;
    /* memory from cudaMallocAsync pools or the virtual memory API has no legacy handle */
    if (cudaSuccess != cudaIpcGetMemHandle(&h, (void *) (uintptr_t) base)) {
        (void) cudaGetLastError();
        return CGPU_ERR_NOT_SUPPORTED;
    }
    memcpy(handle, &h, sizeof(h));
    *offset = (size_t) ((uintptr_t) p - (uintptr_t) base);
    return CGPU_OK;
}

cgpu_status_t cgpu_cuda_default_stream_wait_host(void *ev)
{
    cudaError_t e = cudaEventRecord((cudaEvent_t) ev, cudaStreamLegacy);
    if (cudaSuccess == e && cgpu_thread_worker_shares_cpu()) {
        /* the application's work queued before the post may take long: a worker on the
         * caller's core asks, and gives the core back between questions */
        while (cudaErrorNotReady == (e = cudaEventQuery((cudaEvent_t) ev))) {
            sched_yield();
        }
    } else if (cudaSuccess == e) {
        e = cudaEventSynchronize((cudaEvent_t) ev);
    }
    return cgpu_cuda_check((int) e, "waiting for the default stream");
}

cgpu_status_t cgpu_cuda_ipc_open(const void *handle, void **dptr)
{
    cudaIpcMemHandle_t h;
    memcpy(&h, handle, sizeof(h));
    cudaError_t e = cudaIpcOpenMemHandle(dptr, h, cudaIpcMemLazyEnablePeerAccess);
    if (cudaSuccess != e) {
        *dptr = NULL;
        (void) cudaGetLastError();
        return cgpu_cuda_check((int) e, "cudaIpcOpenMemHandle");
    }
    return CGPU_OK;
}

void cgpu_cuda_ipc_close(void *dptr)
{
    release(REL_IPC, dptr);
}

void cgpu_cuda_ipc_close_now(void *dptr)
{
    if (NULL != dptr && cudaSuccess != cudaIpcCloseMemHandle(dptr)) {
        (void) cudaGetLastError();
    }
}

cgpu_status_t cgpu_cuda_event_record(void *ev, void *stream)
{
    return cgpu_cuda_check((int) cudaEventRecord((cudaEvent_t) ev, (cudaStream_t) stream),
                           "cudaEventRecord");
}

cgpu_status_t cgpu_cuda_event_sync(void *ev)
{
    return cgpu_cuda_check((int) cudaEventSynchronize((cudaEvent_t) ev), "cudaEventSynchronize");
}

cgpu_status_t cgpu_cuda_event_query(void *ev)
{
    cudaError_t e = cudaEventQuery((cudaEvent_t) ev);
    if (cudaErrorNotReady == e) {
        return CGPU_IN_PROGRESS;
    }
    return cgpu_cuda_check((int) e, "cudaEventQuery");
}

cgpu_status_t cgpu_cuda_host_register(void *ptr, size_t bytes)
{
    cudaError_t e = cudaHostRegister(ptr, bytes, cudaHostRegisterDefault);
    if (cudaSuccess != e) {
        (void) cudaGetLastError();
    }
    return cgpu_cuda_check((int) e, "cudaHostRegister");
}

void cgpu_cuda_host_unregister(void *ptr)
{
    if (NULL != ptr && cudaSuccess != cudaHostUnregister(ptr)) {
        (void) cudaGetLastError();
    }
}

cgpu_status_t cgpu_cuda_pci_bus_id(int device, char *buf, int len)
{
    return cgpu_cuda_check((int) cudaDeviceGetPCIBusId(buf, len, device), "cudaDeviceGetPCIBusId");
}

#else /* !CGPU_HAVE_CUDA: a build without the toolkit sees no device */

bool cgpu_cuda_available(void)
{
    return false;
}

bool cgpu_cuda_present(void)
{
    return false;
}

cgpu_mem_kind_t cgpu_cuda_mem_kind(const void *ptr, int *device)
{
    (void) ptr;
    *device = -1;
    return CGPU_MEM_HOST;
}

int cgpu_cuda_current_device(void)
{
    return -1;
}

int cgpu_cuda_mps_enabled(int device)
{
    (void) device;
    return -1;
}

int cgpu_cuda_device_in_use(int device)
{
    (void) device;
    return -1;
}

int cgpu_cuda_device_sms(int device)
{
    (void) device;
    return 0;
}

cgpu_status_t cgpu_cuda_set_device(int device)
{
    (void) device;
    return CGPU_ERR_NOT_SUPPORTED;
}

void cgpu_cuda_inflight_end(void)
{
    (void) pthread_rwlock_unlock(&inflight);
}

void cgpu_cuda_release_pending(void)
{
}

cgpu_status_t cgpu_cuda_malloc(void **ptr, size_t bytes, void *zero_on)
{
    (void) bytes, (void) zero_on;
    *ptr = NULL;
    return CGPU_ERR_NOT_SUPPORTED;
}

void cgpu_cuda_free(void *ptr)
{
    (void) ptr;
}

cgpu_status_t cgpu_cuda_stream_create(void **stream, bool blocking)
{
    (void) blocking;
    *stream = NULL;
    return CGPU_ERR_NOT_SUPPORTED;
}

void cgpu_cuda_stream_destroy(void *stream)
{
    (void) stream;
}

cgpu_status_t cgpu_cuda_stream_sync(void *stream)
{
    (void) stream;
    return CGPU_ERR_NOT_SUPPORTED;
}

cgpu_status_t cgpu_cuda_stream_wait_collective(void *stream)
{
    (void) stream;
    return CGPU_ERR_NOT_SUPPORTED;
}

cgpu_status_t cgpu_cuda_event_create(void **ev)
{
    *ev = NULL;
    return CGPU_ERR_NOT_SUPPORTED;
}

void cgpu_cuda_event_destroy(void *ev)
{
    (void) ev;
}

cgpu_status_t cgpu_cuda_stream_after(void *stream, void *ev, void *other)
{
    (void) stream, (void) ev, (void) other;
    return CGPU_ERR_NOT_SUPPORTED;
}

cgpu_status_t cgpu_cuda_stream_after_default(void *stream, void *ev)
{
    (void) stream, (void) ev;
    return CGPU_ERR_NOT_SUPPORTED;
}

cgpu_status_t cgpu_cuda_copy_async(void *dst, const void *src, size_t bytes, void *stream)
{
    (void) dst, (void) src, (void) bytes, (void) stream;
    return CGPU_ERR_NOT_SUPPORTED;
}

cgpu_status_t cgpu_cuda_copy_rows_async(const cgpu_copy_t *c, void *stream)
{
    (void) c, (void) stream;
    return CGPU_ERR_NOT_SUPPORTED;
}

cgpu_status_t cgpu_cuda_memset_async(void *dst, int v, size_t bytes, void *stream)
{
    (void) dst, (void) v, (void) bytes, (void) stream;
    return CGPU_ERR_NOT_SUPPORTED;
}

cgpu_status_t cgpu_cuda_copy(void *dst, const void *src, size_t bytes)
{
    (void) dst, (void) src, (void) bytes;
    return CGPU_ERR_NOT_SUPPORTED;
}

cgpu_status_t cgpu_cuda_copy_many(const cgpu_copy_t *c, int n)
{
    (void) c, (void) n;
    return CGPU_ERR_NOT_SUPPORTED;
}

void cgpu_cuda_set_time_sliced(void)
{
}

bool cgpu_cuda_time_sliced(void)
{
    return false;
}

cgpu_status_t cgpu_cuda_copy_to_device(const cgpu_copy_t *c, int n)
{
    (void) c, (void) n;
    return CGPU_ERR_NOT_SUPPORTED;
}

cgpu_status_t cgpu_cuda_copy_engine_async(void *dst, const void *src, size_t bytes, void *stream)
{
    (void) dst, (void) src, (void) bytes, (void) stream;
    return CGPU_ERR_NOT_SUPPORTED;
}

cgpu_status_t cgpu_cuda_host_alloc_mapped(void **host, void **dev, size_t bytes)
{
    (void) bytes;
    *host = *dev = NULL;
    return CGPU_ERR_NOT_SUPPORTED;
}

void cgpu_cuda_host_free(void *host)
{
    (void) host;
}

cgpu_status_t cgpu_cuda_ipc_export(void *dptr, void *handle)
{
    (void) dptr, (void) handle;
    return CGPU_ERR_NOT_SUPPORTED;
}

cgpu_status_t cgpu_cuda_ipc_open(const void *handle, void **dptr)
{
    (void) handle;
    *dptr = NULL;
    return CGPU_ERR_NOT_SUPPORTED;
}

cgpu_status_t cgpu_cuda_ipc_export_range(const void *p, void *handle, size_t *offset, uint64_t *id)
{
    (void) p, (void) handle;
    *offset = 0;
    *id = 0;
    return CGPU_ERR_NOT_SUPPORTED;
}

cgpu_status_t cgpu_cuda_default_stream_wait_host(void *ev)
{
    (void) ev;
    return CGPU_ERR_NOT_SUPPORTED;
}

void cgpu_cuda_ipc_close(void *dptr)
{
    (void) dptr;
}

void cgpu_cuda_ipc_close_now(void *dptr)
{
    (void) dptr;
}

cgpu_status_t cgpu_cuda_check(int err, const char *what)
{
    (void) what;
    return 0 == err ? CGPU_OK : CGPU_ERR_DEVICE;
}

cgpu_status_t cgpu_cuda_event_record(void *ev, void *stream)
{
    (void) ev, (void) stream;
    return CGPU_ERR_NOT_SUPPORTED;
}

cgpu_status_t cgpu_cuda_event_sync(void *ev)
{
    (void) ev;
    return CGPU_ERR_NOT_SUPPORTED;
}

cgpu_status_t cgpu_cuda_event_query(void *ev)
{
    (void) ev;
    return CGPU_ERR_NOT_SUPPORTED;
}

cgpu_status_t cgpu_cuda_host_register(void *ptr, size_t bytes)
{
    (void) ptr, (void) bytes;
    return CGPU_ERR_NOT_SUPPORTED;
}

void cgpu_cuda_host_unregister(void *ptr)
{
    (void) ptr;
}

cgpu_status_t cgpu_cuda_pci_bus_id(int device, char *buf, int len)
{
    (void) device;
    if (len > 0) {
        buf[0] = '\0';
    }
    return CGPU_ERR_NOT_SUPPORTED;
}

#endif /* CGPU_HAVE_CUDA */
