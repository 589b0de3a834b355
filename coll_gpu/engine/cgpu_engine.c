/*
 * coll/gpu engine: process-wide state (configuration, logging, live communicators).
 *
 * The list of live internal communicators exists so that cgpu_engine_fini can release
 * what an owner forgot; it is touched only at create/release/fini, never on the data
 * path, and its mutex is never held across a bootstrap (MPI) call.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* sched_getaffinity */
#endif
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "cgpu_comm_internal.h"
#include "cgpu_cuda_kernels.h" /* the LL size classes (plain C) */
#include "cgpu_cuda_pool.h"
#include "cgpu_host_pool.h"
#include "cgpu_seg_pool.h"
#include "cgpu_cuda.h"
#include "cgpu_engine.h"
#include "cgpu_prof.h"

static cgpu_config_t engine_cfg;
static atomic_int engine_up;
static atomic_int engine_live_comms;
static pthread_mutex_t engine_list_lock = PTHREAD_MUTEX_INITIALIZER;
static cgpu_comm_t *engine_comms; /* doubly linked through comm->next/prev */

void cgpu_config_default(cgpu_config_t *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->backend = CGPU_BACKEND_AUTO;
    cfg->slot_bytes = 128 * 1024;
    cfg->nslots = 4;
    cfg->stage_bytes = 1024 * 1024;
    cfg->shared_stage_bytes = 3 * 1024 * 1024;
    cfg->max_comms = 1024;
    cfg->verbose = 0;
    cfg->log = NULL;
    cfg->log_subsystems = CGPU_SUB_ALL;
    cfg->force_node_per_rank = false;
    cfg->cuda_channels = 64;
    cfg->cuda_threads = 512;
    cfg->cuda_slot_bytes = 256 * 1024;
    cfg->cuda_slots = 4;
    cfg->cuda_oneshot_bytes = 1024 * 1024;
    cfg->cuda_small_bytes = -1; /* the measured table (cgpu_cuda_small_limit) */
    /* 4 KiB: a 64 KiB call takes 16 blocks, one LL line a thread (below) */
    cfg->cuda_oneshot_block_bytes = 4u << 10;
    cfg->cuda_oneshot_small_block_bytes = 4u << 10;
    /* LL lines (data and flag in one store) up to 64 KiB: on 2x H200 they save about 1 us
     * a call at 2-8 KiB and 0.3-0.6 us of device time at 16-32 KiB against a flag after a
     * fence; a 64 KiB call in 16 blocks of 4 KiB (one line a thread) saves 1.2-1.8 us
     * (docs/performance.md) */
    cfg->cuda_ll_bytes = 64u << 10;
    cfg->cuda_timeout_s = 60.0;
    cfg->cuda_tree_channels = 8;
    cfg->cuda_a2a_channels = 32;
    cfg->cuda_inbox_pool = 4;
    /* two cover a split/dup loop; each is a segment's size of /dev/shm per process */
    cfg->shm_pool = 2;
    cfg->cuda_ipc_cache_size = 64;
    /* on 4 H200s on one NVSwitch the ring beat the tree at every size (bench/results/
     * 2026-11-28_4xH200.md): auto takes the tree only where a machine shows it winning */
    cfg->cuda_tree_max_bytes = 0;
    cfg->cuda_channel_min_bytes = 8 << 10;
    cfg->cuda_chain_chunk_bytes = 64u << 10;
    cfg->cuda_stream_order = CGPU_ORDER_AUTO;
    cfg->cuda_wait_polls = -2; /* auto */
    cfg->cuda_ce_alltoall_min_bytes = 0;
    cfg->cuda_ce_bcast_min_bytes = 32u << 20;
    cfg->cuda_ce_reduce_min_bytes = 128u << 20;
    cfg->cuda_ce_allreduce_min_bytes = 64u << 20;
    cfg->cuda_resident = -1; /* auto: on (the same at every thread level) */
    cfg->cuda_resident_max_bytes = 64u << 10;
    cfg->cuda_resident_idle_us = 50.0;
    cfg->cuda_resident_life_us = 1000.0;
    cfg->cuda_resident_max_kernels = 4;
    /* 1: clusters where the device has room (cgpu_resident_as_cluster): calls of up to 8
     * blocks are handed on in block 0's cluster (0.3-0.65 us faster at 16-32 KiB than the
     * mailbox), a 64 KiB call's 16 blocks of 4 KiB in two clusters (1.2-1.8 us less device
     * time than 8 blocks with a flag) */
    cfg->cuda_resident_cluster = 1;
    /* the kernel takes a call, hands it on and finds its code path while the host waits
     * for the default stream; a gate shut past the idle time gives the
     * call back and ends the kernel, so default-stream work that needs its
     * multiprocessors gets them as without the gate (test_cuda_colls hog) */
    cfg->cuda_resident_gate = true;
    cfg->cuda_setup_exclusive = true;
    cfg->cuda_setup_wait_ms = 10;
    cfg->cuda_time_sliced = false; /* ranks sharing a GPU without MPS: the host backend */
    cfg->cuda_block_budget = -1;
    cfg->cuda_block_spare = -1;
    cfg->ras_timeout_s = 300.0;
    cfg->ras_abort_on_timeout = false;
    cfg->check_calls = true;
    cfg->ofi_provider = NULL;
    cfg->proxy_max_peers = 1024;
    cfg->proxy_max_inflight = 64;
    cfg->proxy_bounce_bytes = 4u << 20;
    cfg->fake_node = -1;
    cfg->stage_pinned_bytes = (size_t) 128 << 20;
    cfg->stage_direct_min = (size_t) 128 << 10;
}

cgpu_status_t cgpu_engine_init(const cgpu_config_t *cfg)
{
    if (NULL == cfg) {
        return CGPU_ERR_INVALID_ARG;
    }
    if (0 != atomic_load(&engine_up)) {
        return CGPU_ERR_STATE;
    }
    /* Rings need two slots per connection: a rank holds the slot it received while it
     * waits for room at its right neighbour, so one slot deadlocks from 3 ranks on. */
    if (cfg->slot_bytes < 64 || cfg->nslots < 2 || cfg->stage_bytes < 64 ||
        cfg->cuda_channels < 1 || cfg->cuda_channels > 64 || cfg->cuda_threads < 64 ||
        cfg->cuda_threads > 1024 || cfg->cuda_slot_bytes < 4096 || cfg->cuda_slots < 2 ||
        cfg->cuda_tree_channels < 0 || cfg->cuda_tree_channels > 64 || cfg->cuda_a2a_channels < 0 ||
        cfg->cuda_a2a_channels > 64 || cfg->cuda_inbox_pool < 0 || cfg->shm_pool < 0 || cfg->cuda_ipc_cache_size < 0 ||
        cfg->cuda_channel_min_bytes < 1 || cfg->cuda_stream_order < CGPU_ORDER_AUTO ||
        cfg->cuda_stream_order > CGPU_ORDER_BLOCKING_STREAM || cfg->proxy_max_peers < 0 ||
        cfg->proxy_max_inflight < 1 || cfg->proxy_bounce_bytes < 4096 ||
        !(cfg->cuda_resident_idle_us >= 0) || !(cfg->cuda_resident_life_us >= 0) ||
        cfg->cuda_resident_max_kernels < 0 || cfg->cuda_resident_cluster < 0 ||
        cfg->cuda_resident_cluster > 2 || cfg->cuda_oneshot_block_bytes < 1024 ||
        (0 != cfg->cuda_oneshot_small_block_bytes && cfg->cuda_oneshot_small_block_bytes < 1024) ||
        cfg->cuda_ll_bytes > CGPU_CUDA_LL_BYTES_MAX || cfg->cuda_setup_wait_ms < -1 ||
        cfg->cuda_block_budget < -1 || cfg->cuda_block_spare < -1) {
        return CGPU_ERR_INVALID_ARG;
    }
    engine_cfg = *cfg;
    cgpu_log_setup(cfg->log, cfg->verbose, cfg->log_subsystems);
    cgpu_cuda_set_wait_polls(cfg->cuda_wait_polls);
    cgpu_cuda_set_setup_wait(cfg->cuda_setup_exclusive ? cfg->cuda_setup_wait_ms : 0);
    /* whole cache lines, so every slot is aligned for every element type */
    engine_cfg.slot_bytes &= ~(size_t) 63;
    engine_cfg.stage_bytes &= ~(size_t) 63;
    cgpu_prof_load(cfg->profiler);
    cgpu_host_pool_set_cap(cfg->stage_pinned_bytes);
    atomic_store(&engine_up, 1);
    cgpu_progress_setup(cfg->progress, true);
    return CGPU_OK;
}

void cgpu_engine_for_each_comm(void (*fn)(cgpu_comm_t *comm, void *arg), void *arg)
{
    pthread_mutex_lock(&engine_list_lock);
    for (cgpu_comm_t *c = engine_comms; NULL != c; c = c->next) {
        fn(c, arg);
    }
    pthread_mutex_unlock(&engine_list_lock);
}

void cgpu_engine_fini(void)
{
    if (0 == atomic_exchange(&engine_up, 0)) {
        return;
    }
    cgpu_progress_setup(NULL, false); /* MPI is being finalized: its progress is off limits */
    cgpu_ras_watchdog_stop();
    pthread_mutex_lock(&engine_list_lock);
    for (cgpu_comm_t *c = engine_comms; NULL != c; c = c->next) {
        cgpu_log(CGPU_LOG_INFO,
                 "engine: internal communicator (rank %d of %d) still alive at finalize; "
                 "releasing its shared memory now",
                 c->rank, c->size);
        cgpu_prof_comm_fini(&c->prof);
        cgpu_comm_free_resources(c);
    }
    pthread_mutex_unlock(&engine_list_lock);
    cgpu_net_shutdown();
    cgpu_stager_pool_drain();
    cgpu_host_pool_drain();
    cgpu_cuda_pool_fini();
    cgpu_seg_pool_fini();
    cgpu_cuda_release_pending();
    cgpu_prof_unload();
}

void cgpu_engine_set_threads(bool multiple)
{
    if (engine_cfg.cuda_wait_polls < -1) { /* auto */
        engine_cfg.cuda_wait_polls = multiple ? 32 : -1;
    }
    cgpu_cuda_set_wait_polls(engine_cfg.cuda_wait_polls);
    if (CGPU_ORDER_AUTO == engine_cfg.cuda_stream_order) {
        /* not the blocking stream: CUDA does not order it after the application's other
         * blocking streams (seen under MPS) */
        engine_cfg.cuda_stream_order = CGPU_ORDER_EVENT;
    }
    if (engine_cfg.cuda_resident < 0) { /* another thread's device-wide synchronize (a
                                         * cudaFree) waits at most cuda_resident_life_us */
        engine_cfg.cuda_resident = 1;
    }
}

const cgpu_config_t *cgpu_engine_config(void)
{
    return &engine_cfg;
}

int cgpu_engine_live_comms(void)
{
    return atomic_load_explicit(&engine_live_comms, memory_order_relaxed);
}

bool cgpu_engine_is_up(void)
{
    return 0 != atomic_load(&engine_up);
}

cgpu_status_t cgpu_engine_register_comm(cgpu_comm_t *comm)
{
    cgpu_status_t st = CGPU_OK;
    pthread_mutex_lock(&engine_list_lock);
    int live = atomic_load(&engine_live_comms);
    if (engine_cfg.max_comms > 0 && live >= engine_cfg.max_comms) {
        st = CGPU_ERR_NO_RESOURCE;
    } else {
        comm->prev = NULL;
        comm->next = engine_comms;
        if (NULL != engine_comms) {
            engine_comms->prev = comm;
        }
        engine_comms = comm;
        atomic_fetch_add(&engine_live_comms, 1);
    }
    pthread_mutex_unlock(&engine_list_lock);
    return st;
}

void cgpu_engine_unregister_comm(cgpu_comm_t *comm)
{
    pthread_mutex_lock(&engine_list_lock);
    if (NULL != comm->prev) {
        comm->prev->next = comm->next;
    } else if (engine_comms == comm) {
        engine_comms = comm->next;
    }
    if (NULL != comm->next) {
        comm->next->prev = comm->prev;
    }
    comm->next = comm->prev = NULL;
    atomic_fetch_sub(&engine_live_comms, 1);
    pthread_mutex_unlock(&engine_list_lock);
}

cgpu_buf_kind_t cgpu_buf_kind(const void *ptr, int *device)
{
    switch (cgpu_cuda_mem_kind(ptr, device)) {
    case CGPU_MEM_DEVICE:
        return CGPU_BUF_DEVICE;
    case CGPU_MEM_MANAGED:
        return CGPU_BUF_MANAGED;
    default:
        return CGPU_BUF_HOST;
    }
}

bool cgpu_engine_cuda_usable(void)
{
    return cgpu_cuda_available();
}

bool cgpu_engine_gpu_present(void)
{
    return cgpu_cuda_present();
}

cgpu_status_t cgpu_engine_copy(void *dst, const void *src, size_t bytes)
{
    const cgpu_copy_t c = {.dst = dst, .src = src, .bytes = bytes};
    return cgpu_engine_copy_many(&c, 1);
}

cgpu_status_t cgpu_engine_copy_many(const cgpu_copy_t *c, int n)
{
    /* every copy goes between the same two memories (the contract): the first one with
     * bytes tells, for two driver queries in all instead of two a copy */
    int d, i = 0;
    while (i < n && 0 == c[i].bytes) {
        ++i;
    }
    const cgpu_buf_kind_t dst = i < n ? cgpu_buf_kind(c[i].dst, &d) : CGPU_BUF_HOST;
    const bool src_host = i >= n || CGPU_BUF_HOST == cgpu_buf_kind(c[i].src, &d);
    if (CGPU_BUF_HOST != dst || !src_host) {
        /* on a GPU time-sliced with another process, a small host-to-device copy waits for
         * the other's time slice unless it takes a form a copy engine runs */
        if (CGPU_BUF_DEVICE == dst && src_host && cgpu_cuda_time_sliced()) {
            return cgpu_cuda_copy_to_device(c + i, n - i);
        }
        return cgpu_cuda_copy_many(c, n);
    }
    for (int k = i; k < n; ++k) {
        for (size_t r = 0; r < (c[k].rows > 1 ? c[k].rows : 1); ++r) {
            memmove((char *) c[k].dst + r * c[k].pitch, (const char *) c[k].src + r * c[k].pitch,
                    c[k].bytes);
        }
    }
    return CGPU_OK;
}

int cgpu_engine_current_device(void)
{
    return cgpu_cuda_current_device();
}

cgpu_status_t cgpu_engine_set_device(int device)
{
    return cgpu_cuda_set_device(device);
}
