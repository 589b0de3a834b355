/* The host's side of bench/poll_probe2.cu and poll_probe3.cu: mapped host memory for
 * `copies` copies of a descriptor word (one 4 KiB page each) and an acknowledgement word,
 * one round (a random wait of 0-3 us, the number written into every copy, then the wait
 * for the kernel's acknowledgement), and the statistics of a layout's round trips. */
#ifndef CGPU_POLL_PROBE_HOST_H
#define CGPU_POLL_PROBE_HOST_H
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <algorithm>
#include <vector>

#define CK(x)                                                                                      \
    do {                                                                                           \
        cudaError_t e_ = (x);                                                                      \
        if (cudaSuccess != e_) {                                                                   \
            fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_));             \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

enum { PP_STRIDE = 512 /* words between copies: a 4 KiB page each */, PP_COPIES = 8 };

struct pp_mem {
    uint64_t *desc_h, *desc_d; /* PP_COPIES copies, PP_STRIDE words apart */
    volatile uint64_t *ack_h;
    uint64_t *ack_d;
};

static inline double pp_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
}

static inline pp_mem pp_alloc(void)
{
    pp_mem m;
    CK(cudaHostAlloc((void **) &m.desc_h, PP_COPIES * PP_STRIDE * 8, cudaHostAllocMapped));
    CK(cudaHostGetDevicePointer((void **) &m.desc_d, m.desc_h, 0));
    CK(cudaHostAlloc((void **) &m.ack_h, 64, cudaHostAllocMapped));
    CK(cudaHostGetDevicePointer((void **) &m.ack_d, (void *) m.ack_h, 0));
    return m;
}

/* before a layout: every copy and the acknowledgement back to 0 */
static inline void pp_reset(pp_mem &m)
{
    memset(m.desc_h, 0, PP_COPIES * PP_STRIDE * 8);
    *m.ack_h = 0;
}

/* round k: wait 0-3 us at random, write k into the first `copies` copies, wait for the
 * acknowledgement; the round trip in us, or -1 past limit_us */
static inline double pp_round(pp_mem &m, uint64_t k, int copies, double limit_us)
{
    const double gap = (rand() % 3000) * 1e-3, t0 = pp_now_us();
    while (pp_now_us() - t0 < gap) {
    }
    const double ts = pp_now_us();
    for (int c = 0; c < copies; ++c) {
        ((volatile uint64_t *) m.desc_h)[c * PP_STRIDE] = k;
    }
    while (*m.ack_h < k) {
        if (limit_us > 0 && pp_now_us() - ts > limit_us) {
            return -1;
        }
    }
    return pp_now_us() - ts;
}

struct pp_stats {
    double mean, median, min, p90;
};

/* the round trips after the first 100 (warm-up) */
static inline pp_stats pp_summary(const std::vector<double> &rt)
{
    std::vector<double> s(rt.size() > 100 ? rt.begin() + 100 : rt.begin(), rt.end());
    std::sort(s.begin(), s.end());
    if (s.empty()) {
        return pp_stats{0, 0, 0, 0};
    }
    double sum = 0;
    for (double x : s) {
        sum += x;
    }
    return pp_stats{sum / s.size(), s[s.size() / 2], s[0], s[s.size() * 9 / 10]};
}
#endif
