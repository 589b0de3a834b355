/*
 * coll/gpu engine, inter-node proxy: where the progress thread runs and where the bounce
 * buffers live.
 *
 * The thread is pinned to the cpuset nearest the process's GPU (hwloc, by the GPU's PCI bus
 * id), so that it and its staging copies run next to the GPU; without a GPU it is left where
 * the process is bound. Bounce buffers go on the GPU's NUMA node, else on the thread's (when
 * it has exactly one), else on first-touch memory. Both choices are logged (info), since a
 * wrong placement shows only as slowness. Called by the progress thread at its set-up.
 */
#include "cgpu_config.h"

#include <stdio.h>
#include <stdlib.h>

#include "cgpu_cuda.h"
#include "proxy_internal.h"

void cgpu_proxy_topology(void)
{
    char busid[32] = "";
    char *near_str = NULL, *bind_str = NULL;
    hwloc_obj_t near = NULL;
    hwloc_bitmap_t cur = NULL;
    const char *bind_how = "left where the process is bound";

    cgpu_proxy.bounce_node = -1;
    if (0 != hwloc_topology_init(&cgpu_proxy.topo)) {
        cgpu_proxy.topo = NULL;
        cgpu_log(CGPU_LOG_INFO, "proxy: hwloc_topology_init failed; thread left unbound");
        return;
    }
    (void) hwloc_topology_set_io_types_filter(cgpu_proxy.topo, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    if (0 != hwloc_topology_load(cgpu_proxy.topo)) {
        cgpu_log(CGPU_LOG_INFO, "proxy: hwloc_topology_load failed; thread left unbound");
        hwloc_topology_destroy(cgpu_proxy.topo);
        cgpu_proxy.topo = NULL;
        return;
    }
    const int nnuma = hwloc_get_nbobjs_by_type(cgpu_proxy.topo, HWLOC_OBJ_NUMANODE);
    const int ncores = hwloc_get_nbobjs_by_type(cgpu_proxy.topo, HWLOC_OBJ_CORE);
    const int npus = hwloc_get_nbobjs_by_type(cgpu_proxy.topo, HWLOC_OBJ_PU);

    if (cgpu_proxy.device >= 0 &&
        CGPU_OK == cgpu_cuda_pci_bus_id(cgpu_proxy.device, busid, (int) sizeof(busid))) {
        hwloc_obj_t pci = hwloc_get_pcidev_by_busidstring(cgpu_proxy.topo, busid);
        if (NULL != pci) {
            near = hwloc_get_non_io_ancestor_obj(cgpu_proxy.topo, pci);
        }
    }
    if (NULL != near && NULL != near->cpuset) {
        (void) hwloc_bitmap_list_asprintf(&near_str, near->cpuset);
        if (0 == hwloc_set_cpubind(cgpu_proxy.topo, near->cpuset, HWLOC_CPUBIND_THREAD)) {
            bind_how = "pinned near the GPU";
        } else {
            bind_how = "not pinned (hwloc_set_cpubind refused), left where the process is bound";
        }
    }
    cur = hwloc_bitmap_alloc();
    if (NULL != cur && 0 == hwloc_get_cpubind(cgpu_proxy.topo, cur, HWLOC_CPUBIND_THREAD)) {
        (void) hwloc_bitmap_list_asprintf(&bind_str, cur);
    }

    /* bounce buffers: the GPU's NUMA node, else the one the thread runs on (if only one) */
    hwloc_nodeset_t nodes = hwloc_bitmap_alloc();
    if (NULL != nodes) {
        if (NULL != near && NULL != near->nodeset) {
            hwloc_bitmap_copy(nodes, near->nodeset);
        } else if (NULL != cur) {
            hwloc_cpuset_to_nodeset(cgpu_proxy.topo, cur, nodes);
        }
        if (1 == hwloc_bitmap_weight(nodes)) {
            cgpu_proxy.bounce_nodes = nodes;
            cgpu_proxy.bounce_node = hwloc_bitmap_first(nodes);
        } else {
            hwloc_bitmap_free(nodes);
        }
    }
    char numa_str[48];
    if (cgpu_proxy.bounce_node >= 0) {
        snprintf(numa_str, sizeof(numa_str), "NUMA node %d", cgpu_proxy.bounce_node);
    } else {
        snprintf(numa_str, sizeof(numa_str), "first-touch memory (no single NUMA node)");
    }
    if (cgpu_proxy.device >= 0) {
        cgpu_log(CGPU_LOG_INFO,
                 "proxy: topology: %d NUMA node(s), %d core(s), %d PU(s); GPU %d (%s) near "
                 "cpuset %s; progress thread %s (cpuset %s); bounce buffers on %s",
                 nnuma, ncores, npus, cgpu_proxy.device,
                 '\0' != busid[0] ? busid : "bus id unknown",
                 NULL != near_str ? near_str : "unknown", bind_how,
                 NULL != bind_str ? bind_str : "?", numa_str);
    } else {
        cgpu_log(CGPU_LOG_INFO,
                 "proxy: topology: %d NUMA node(s), %d core(s), %d PU(s); no usable GPU; "
                 "progress thread %s (cpuset %s); bounce buffers on %s",
                 nnuma, ncores, npus, bind_how, NULL != bind_str ? bind_str : "?", numa_str);
    }
    free(near_str);
    free(bind_str);
    hwloc_bitmap_free(cur);
}

void cgpu_proxy_topology_free(void)
{
    if (NULL != cgpu_proxy.bounce_nodes) {
        hwloc_bitmap_free(cgpu_proxy.bounce_nodes);
        cgpu_proxy.bounce_nodes = NULL;
    }
    if (NULL != cgpu_proxy.topo) {
        hwloc_topology_destroy(cgpu_proxy.topo);
        cgpu_proxy.topo = NULL;
    }
}
