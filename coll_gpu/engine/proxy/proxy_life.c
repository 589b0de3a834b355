/*
 * coll/gpu engine, inter-node proxy: the process-wide reference.
 *
 * One proxy per process, shared by every communicator: the first cgpu_proxy_acquire starts
 * the progress thread (which opens the provider) and the last cgpu_proxy_release stops it.
 * A start that failed is remembered and returned again without a retry, so a process that
 * cannot reach the network says so once. What the start found (endpoint name, provider,
 * FI_HMEM, tag widths, chunk size) is read-only while the proxy is up and is answered here.
 */
#include "cgpu_config.h"

#include <pthread.h>
#include <string.h>

#include "cgpu_cuda.h"
#include "proxy_internal.h"

struct cgpu_proxy_state cgpu_proxy = {.failed = CGPU_OK};

/* The lifecycle: references, start and stop. */
static pthread_mutex_t life_lock = PTHREAD_MUTEX_INITIALIZER;

/* Test hooks for the next start (cgpu_proxy_set_test_flags). */
static unsigned proxy_test_flags;

void cgpu_proxy_set_test_flags(unsigned flags)
{
    proxy_test_flags = flags;
}

bool cgpu_proxy_built(void)
{
    return true;
}

/* Start the thread and wait until it has opened the provider (life_lock held: local work,
 * no peer involved). */
static cgpu_status_t proxy_start(void)
{
    const cgpu_config_t *cfg = cgpu_engine_config();
    cgpu_proxy.flags = proxy_test_flags;
    cgpu_proxy.device = cgpu_cuda_available() ? cgpu_cuda_current_device() : -1;
    cgpu_proxy.max_peers = cfg->proxy_max_peers;
    cgpu_proxy.stop = false;
    cgpu_proxy.setup_done = false;
    cgpu_proxy.sub_head = cgpu_proxy.sub_tail = NULL;
    cgpu_proxy.pend_head = cgpu_proxy.pend_tail = NULL;
    memset(cgpu_proxy.active, 0, sizeof(cgpu_proxy.active));
    memset(cgpu_proxy.busy, 0, sizeof(cgpu_proxy.busy));
    atomic_store(&cgpu_proxy_nqueued, 0);
    atomic_store(&cgpu_proxy_ncompleted, 0);
    atomic_store(&cgpu_proxy_nconnected, 0);

    cgpu_status_t st = cgpu_proxy_thread_start();
    if (CGPU_OK != st) {
        return st;
    }
    atomic_store(&cgpu_proxy.up, true);
    return CGPU_OK;
}

cgpu_status_t cgpu_proxy_acquire(void)
{
    cgpu_status_t st = CGPU_OK;
    pthread_mutex_lock(&life_lock);
    if (CGPU_OK != cgpu_proxy.failed) {
        st = cgpu_proxy.failed;
    } else if (cgpu_proxy.refs > 0) {
        cgpu_proxy.refs++;
    } else {
        st = proxy_start();
        if (CGPU_OK == st) {
            cgpu_proxy.refs = 1;
        } else {
            cgpu_proxy.failed = st;
            cgpu_log(CGPU_LOG_WARN,
                     "proxy: the inter-node proxy could not start (%s); ranks on other nodes "
                     "cannot be reached through it in this process",
                     cgpu_status_string(st));
        }
    }
    pthread_mutex_unlock(&life_lock);
    return st;
}

void cgpu_proxy_release(void)
{
    pthread_mutex_lock(&life_lock);
    if (cgpu_proxy.refs <= 0) {
        pthread_mutex_unlock(&life_lock);
        cgpu_log(CGPU_LOG_DEBUG, "proxy: release without a reference (ignored)");
        return;
    }
    if (0 == --cgpu_proxy.refs) {
        atomic_store(&cgpu_proxy.up, false);
        cgpu_proxy_thread_stop();
        cgpu_proxy_peers_free();
        cgpu_log(CGPU_LOG_DEBUG, "proxy: stopped");
    }
    pthread_mutex_unlock(&life_lock);
}

cgpu_status_t cgpu_proxy_addr(void *addr)
{
    if (!atomic_load(&cgpu_proxy.up)) {
        return CGPU_ERR_STATE;
    }
    memcpy(addr, cgpu_proxy.name, CGPU_PROXY_ADDR_BYTES);
    return CGPU_OK;
}

const char *cgpu_proxy_provider(void)
{
    return atomic_load(&cgpu_proxy.up) ? cgpu_proxy.provider : "none";
}

bool cgpu_proxy_hmem(void)
{
    return atomic_load(&cgpu_proxy.up) && cgpu_proxy.hmem;
}

uint32_t cgpu_proxy_max_context_id(void)
{
    if (!atomic_load(&cgpu_proxy.up)) {
        return 0;
    }
    return cgpu_proxy.directed ? 0xfffffu : 0xfffu;
}

uint32_t cgpu_proxy_max_tag(void)
{
    if (!atomic_load(&cgpu_proxy.up)) {
        return 0;
    }
    return cgpu_proxy.directed ? UINT32_MAX : 0xffffffu;
}

size_t cgpu_proxy_chunk_bytes(void)
{
    return atomic_load(&cgpu_proxy.up) ? cgpu_proxy.chunk : 0;
}
