/*
 * coll/gpu CUDA transport: runtime wrappers, IPC handles, memory kinds.
 */
#include "btl_glue/cgpu_cuda.h"
#include "cgpu_config.h"
#include "cgpu_engine.h"

#ifdef CGPU_HAVE_CUDA

#include <cuda_runtime.h>
#include <pthread.h>
#include <string.h>

_Static_assert(sizeof(cudaIpcMemHandle_t) == CGPU_CUDA_IPC_HANDLE_BYTES, "IPC handle size");

static pthread_once_t cuda_once = PTHREAD_ONCE_INIT;
static bool cuda_ok;

static void cuda_probe(void)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    cuda_ok = (cudaSuccess == e && n > 0);
    if (cudaSuccess != e) {
        cgpu_log(CGPU_LOG_INFO, "cuda: no usable CUDA runtime/driver (%s)", cudaGetErrorString(e));
        (void) cudaGetLastError();
    }
}

bool cgpu_cuda_available(void)
{
    pthread_once(&cuda_once, cuda_probe);
    return cuda_ok;
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

cgpu_status_t cgpu_cuda_set_device(int device)
{
    return cgpu_cuda_check((int) cudaSetDevice(device), "cudaSetDevice");
}

cgpu_status_t cgpu_cuda_malloc(void **ptr, size_t bytes)
{
    cudaError_t e = cudaMalloc(ptr, bytes);
    if (cudaSuccess != e) {
        *ptr = NULL;
        cgpu_log(CGPU_LOG_WARN, "cuda: cudaMalloc of %zu bytes failed: %s", bytes,
                 cudaGetErrorString(e));
        (void) cudaGetLastError();
        return CGPU_ERR_NO_MEMORY;
    }
    /* synchronously: peers write counters into this memory as soon as they map it */
    e = cudaMemset(*ptr, 0, bytes);
    if (cudaSuccess == e) {
        e = cudaDeviceSynchronize();
    }
    if (cudaSuccess != e) {
        cudaFree(*ptr);
        *ptr = NULL;
        return cgpu_cuda_check((int) e, "cudaMemset");
    }
    return CGPU_OK;
}

void cgpu_cuda_free(void *ptr)
{
    if (NULL != ptr) {
        (void) cudaFree(ptr);
    }
}

cgpu_status_t cgpu_cuda_stream_create(void **stream)
{
    cudaStream_t s = NULL;
    /* default flags: the stream synchronizes with the legacy default stream, so work the
     * caller queued there before the MPI call is ordered before ours */
    cgpu_status_t st = cgpu_cuda_check((int) cudaStreamCreate(&s), "cudaStreamCreate");
    *stream = (void *) s;
    return st;
}

void cgpu_cuda_stream_destroy(void *stream)
{
    if (NULL != stream) {
        (void) cudaStreamDestroy((cudaStream_t) stream);
    }
}

cgpu_status_t cgpu_cuda_stream_sync(void *stream)
{
    return cgpu_cuda_check((int) cudaStreamSynchronize((cudaStream_t) stream),
                           "collective on the GPU");
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

cgpu_status_t cgpu_cuda_copy(void *dst, const void *src, size_t bytes)
{
    if (0 == bytes) {
        return CGPU_OK;
    }
    return cgpu_cuda_check((int) cudaMemcpy(dst, src, bytes, cudaMemcpyDefault), "cudaMemcpy");
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
    if (NULL != host) {
        (void) cudaFreeHost(host);
    }
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
    if (NULL != dptr) {
        (void) cudaIpcCloseMemHandle(dptr);
    }
}

#else /* !CGPU_HAVE_CUDA: a build without the toolkit sees no device */

bool cgpu_cuda_available(void)
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

cgpu_status_t cgpu_cuda_set_device(int device)
{
    (void) device;
    return CGPU_ERR_NOT_SUPPORTED;
}

cgpu_status_t cgpu_cuda_malloc(void **ptr, size_t bytes)
{
    (void) bytes;
    *ptr = NULL;
    return CGPU_ERR_NOT_SUPPORTED;
}

void cgpu_cuda_free(void *ptr)
{
    (void) ptr;
}

cgpu_status_t cgpu_cuda_stream_create(void **stream)
{
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

cgpu_status_t cgpu_cuda_copy_async(void *dst, const void *src, size_t bytes, void *stream)
{
    (void) dst, (void) src, (void) bytes, (void) stream;
    return CGPU_ERR_NOT_SUPPORTED;
}

cgpu_status_t cgpu_cuda_copy(void *dst, const void *src, size_t bytes)
{
    (void) dst, (void) src, (void) bytes;
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

void cgpu_cuda_ipc_close(void *dptr)
{
    (void) dptr;
}

cgpu_status_t cgpu_cuda_check(int err, const char *what)
{
    (void) what;
    return 0 == err ? CGPU_OK : CGPU_ERR_DEVICE;
}

#endif /* CGPU_HAVE_CUDA */
