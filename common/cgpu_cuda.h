/*
 * coll/gpu base: the CUDA runtime behind a C interface without CUDA types.
 *
 * Built only with the CUDA toolkit (CGPU_HAVE_CUDA); without it every function reports
 * "no device" so the rest of the engine needs no #ifdef. The runtime is linked
 * statically and loads the driver itself at first use, so the plugin loads on machines
 * without a GPU driver and simply sees no device there.
 */
#ifndef CGPU_CUDA_H
#define CGPU_CUDA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cgpu_status.h"

#define CGPU_CUDA_IPC_HANDLE_BYTES 64

typedef enum cgpu_mem_kind {
    CGPU_MEM_HOST = 0,    /* pageable or pinned host memory, or unknown to CUDA */
    CGPU_MEM_DEVICE = 1,  /* cudaMalloc / cudaMallocAsync / caching allocators */
    CGPU_MEM_MANAGED = 2, /* cudaMallocManaged */
} cgpu_mem_kind_t;

/** True when the CUDA runtime works here and sees at least one device. Cached. The first
 * call initializes the driver (tens of ms, more with several processes on a GPU) unless the
 * application has already. */
bool cgpu_cuda_available(void);

/** Whether this node may have a GPU for us, without initializing CUDA where the NVIDIA
 * driver's device files show one: the question MPI_Init asks (cgpu_cuda_available then
 * answers at the first collective, after the application has set its device up). Where
 * there are no such files it is cgpu_cuda_available. */
bool cgpu_cuda_present(void);

/**
 * What kind of memory @p ptr points into (any address inside an allocation works).
 * @param device  receives the device ordinal for DEVICE/MANAGED, -1 otherwise
 */
cgpu_mem_kind_t cgpu_cuda_mem_kind(const void *ptr, int *device);

/** The calling thread's current device, or -1. */
int cgpu_cuda_current_device(void);
/** Whether contexts on @p device are MPS clients: 1 yes, 0 no, -1 unknown (a runtime
 *  without the attribute, or no device). */
int cgpu_cuda_mps_enabled(int device);
/** Whether the application works on @p device: 1 when its primary context is active and
 *  was not made by our own calls (it was not active at our first CUDA use), or when the
 *  calling thread has a context of its own current there (cuCtxCreate); 0 when not
 *  (cudaGetDevice names device 0 before the application chooses one: Open MPI's own
 *  collectives on host memory inside MPI_Comm_split_type reach ours so; where the driver
 *  lacks cuPointerGetAttributes, the runtime's pointer query then makes that device's
 *  context, which is told apart as ours); -1 unknown (no driver call for it, no device).
 *  The application may still work on a device whose context we made: then 0, on the safe
 *  side. */
int cgpu_cuda_device_in_use(int device);
/** The multiprocessors of @p device, or 0 (no device). */
int cgpu_cuda_device_sms(int device);

/** Make @p device current for the calling thread. */
cgpu_status_t cgpu_cuda_set_device(int device);

/** Device allocation, zero-filled on stream @p zero_on unless it is NULL. */
cgpu_status_t cgpu_cuda_malloc(void **ptr, size_t bytes, void *zero_on);
/** Release of device memory. It and cgpu_cuda_host_free / cgpu_cuda_ipc_close never wait
 * for a collective kernel of this process: while one is in flight the release is
 * deferred until none is (see cgpu_cuda_inflight_begin). */
void cgpu_cuda_free(void *ptr);

/** Bracket a collective from its first launch to its completion (any thread). */
void cgpu_cuda_inflight_begin(void);
void cgpu_cuda_inflight_end(void);
/** Perform every deferred release now, waiting for collectives in flight (finalize). */
void cgpu_cuda_release_pending(void);
/** Bracket a communicator's local CUDA set-up (allocations, IPC export and open), which
 * the runtime might make wait for kernels running on the device: it waits until no
 * collective of this process is in flight (at most the time cgpu_cuda_set_setup_wait
 * gave), and then holds new ones back until it ends. Returns whether it holds them back;
 * pass that to cgpu_cuda_setup_end. Never held across a call into MPI or a wait for a
 * peer. */
bool cgpu_cuda_setup_begin(void);
void cgpu_cuda_setup_end(bool held);
/** Called by cgpu_cuda_setup_begin once no collective is in flight (the resident kernels
 * are stopped there: a set-up call may wait for every kernel running on the device). */
void cgpu_cuda_set_setup_hook(void (*fn)(void));
/** How long cgpu_cuda_setup_begin waits for the collectives in flight to end, in ms,
 * before the set-up goes ahead beside them: < 0 for ever, 0 not at all. */
void cgpu_cuda_set_setup_wait(int ms);

/** A non-blocking stream (no implicit ordering with the legacy default stream), or with
 * @p blocking a blocking one: its work starts after what the legacy default stream holds
 * when it is enqueued, and the legacy stream's later work waits for it. */
cgpu_status_t cgpu_cuda_stream_create(void **stream, bool blocking);
void cgpu_cuda_stream_destroy(void *stream);
/** Wait for everything enqueued on @p stream (local work: copies, memsets; how is
 * coll_gpu_cuda_wait_polls); converts asynchronous errors. Runs no MPI progress (callers
 * may hold a lock). */
cgpu_status_t cgpu_cuda_stream_sync(void *stream);

/** How many polls a collective's stream wait spins before it gives the core away between
 * polls (-1: spin; the engine resolves coll_gpu_cuda_wait_polls for the thread level). */
void cgpu_cuda_set_wait_polls(int polls);
/** The same for a collective's kernels, which wait for the peers': it polls, and once the
 * wait lasts it runs the MPI library's progress (cgpu_engine_progress). */
cgpu_status_t cgpu_cuda_stream_wait_collective(void *stream);
/** An event without timing, for cgpu_cuda_stream_after_default. */
cgpu_status_t cgpu_cuda_event_create(void **ev);
/* record ev on stream / wait on the host until the work before it is done */
cgpu_status_t cgpu_cuda_event_record(void *ev, void *stream);
cgpu_status_t cgpu_cuda_event_sync(void *ev);
void cgpu_cuda_event_destroy(void *ev);
/** Work enqueued on @p stream from now on starts after what @p other holds now (@p ev is
 * recorded there; it can be recorded again once this returns). */
cgpu_status_t cgpu_cuda_stream_after(void *stream, void *ev, void *other);
/** Work enqueued on @p stream from now on starts after everything already enqueued on the
 * legacy default stream and every blocking stream (@p ev is recorded there): a pageable
 * cudaMemcpy or a cudaMemset returns to the caller before the device has finished it. The
 * host does not wait. */
cgpu_status_t cgpu_cuda_stream_after_default(void *stream, void *ev);

/** Copy between any two addresses (host or device), enqueued on @p stream. */
cgpu_status_t cgpu_cuda_copy_async(void *dst, const void *src, size_t bytes, void *stream);
/** Fill device memory, enqueued on @p stream. */
cgpu_status_t cgpu_cuda_memset_async(void *dst, int v, size_t bytes, void *stream);
/** Synchronous copy between any two addresses. */
cgpu_status_t cgpu_cuda_copy(void *dst, const void *src, size_t bytes);
/** One copy of a batch. */
typedef struct cgpu_copy {
    void *dst;
    const void *src;
    size_t bytes;
    /* rows > 1: @p rows runs of @p bytes each, the next one @p pitch bytes further in both
     * dst and src (bytes <= pitch), such as the fields of an array of structs */
    size_t rows, pitch;
} cgpu_copy_t;
/** The @p n copies of @p c, queued one after another with one wait for all (as synchronous
 * as cgpu_cuda_copy, at the cost of one wait). */
cgpu_status_t cgpu_cuda_copy_many(const cgpu_copy_t *c, int n);
/** This process runs on a GPU that another process uses too, without MPS (a communicator's
 * set-up found so): the GPU then switches between the processes' contexts a time slice
 * at a time (about 270 us on an H200, twice that with four processes) for any work that
 * needs its engines of compute, which include kernels, device-to-device copies and a
 * host-to-device copy of one run under 32 KiB from pinned memory or up to at least 64 KiB
 * from pageable memory (the driver writes those through the command stream); copy-engine work
 * (device-to-host copies, host-to-device copies of two rows or more at any size, larger runs
 * from pinned memory) and stream memory operations switch at no cost
 * (bench/bench_sliced_copies). */
void cgpu_cuda_set_time_sliced(void);
bool cgpu_cuda_time_sliced(void);
/** Host-to-device writes up to this size go as stream memory operations. */
#define CGPU_CUDA_WRITE_OPS_MAX 8
/** Host-to-device runs from 2 bytes up to this size go as two rows. */
#define CGPU_CUDA_SLICED_ROWS_MAX ((size_t) 256 << 10)
/** The host-to-device copies @p c in forms that need no time slice on a time-sliced GPU,
 * waited for like cgpu_cuda_copy_many: up to CGPU_CUDA_WRITE_OPS_MAX aligned bytes as stream
 * memory operations (about 7 us on an H200 shared by two processes), other runs up to
 * CGPU_CUDA_SLICED_ROWS_MAX as two rows for a copy engine (9-14 us to 24 KiB, two to four
 * processes), against 270-540 us for the plain copy. */
cgpu_status_t cgpu_cuda_copy_to_device(const cgpu_copy_t *c, int n);
/** The copy of @p bytes from @p src to @p dst (any memories), queued on @p stream in the
 * two-row form of cgpu_cuda_copy_to_device where it is a run of 2 bytes to
 * CGPU_CUDA_SLICED_ROWS_MAX, else as one run: on a time-sliced GPU a host-to-device copy so
 * needs no time slice, and the other directions lose nothing by it. */
cgpu_status_t cgpu_cuda_copy_engine_async(void *dst, const void *src, size_t bytes, void *stream);
/** The copy @p c (rows and pitch included), enqueued on @p stream. */
cgpu_status_t cgpu_cuda_copy_rows_async(const cgpu_copy_t *c, void *stream);

/** Pinned host memory the device can write directly; *dev is the device's view. */
cgpu_status_t cgpu_cuda_host_alloc_mapped(void **host, void **dev, size_t bytes);
void cgpu_cuda_host_free(void *host);

/** Export / open / close a CUDA IPC handle of a device allocation. */
cgpu_status_t cgpu_cuda_ipc_export(void *dptr, void *handle /* CGPU_CUDA_IPC_HANDLE_BYTES */);
cgpu_status_t cgpu_cuda_ipc_open(const void *handle, void **dptr);
/** Export the allocation holding @p p (any pointer into it): its handle, where @p p lies in
 * it, and the allocation's process-wide unique id. CGPU_ERR_NOT_SUPPORTED, silently, for
 * memory without an IPC handle. */
cgpu_status_t cgpu_cuda_ipc_export_range(const void *p, void *handle, size_t *offset, uint64_t *id);
/** Close a mapping at once; only while no collective of this process is in flight. */
void cgpu_cuda_ipc_close_now(void *dptr);
/** Wait on the host for the work already enqueued on the legacy default stream and every
 * blocking stream (@p ev is recorded there). */
cgpu_status_t cgpu_cuda_default_stream_wait_host(void *ev);
void cgpu_cuda_ipc_close(void *dptr);

/** Convert a CUDA error number returned by a kernel launcher; logs it with @p what. */
cgpu_status_t cgpu_cuda_check(int err, const char *what);

/** CGPU_OK when the work before @p ev is done, CGPU_IN_PROGRESS while it is not (never
 * blocks), or the error of that work. */
cgpu_status_t cgpu_cuda_event_query(void *ev);

/** Page-lock host memory allocated elsewhere (e.g. bound to a NUMA node with hwloc) so
 * that copies to and from the device are asynchronous DMA; and undo it. */
cgpu_status_t cgpu_cuda_host_register(void *ptr, size_t bytes);
void cgpu_cuda_host_unregister(void *ptr);

/** PCI bus id of @p device ("0000:17:00.0") into @p buf, for locality (hwloc). */
cgpu_status_t cgpu_cuda_pci_bus_id(int device, char *buf, int len);

#endif /* CGPU_CUDA_H */
