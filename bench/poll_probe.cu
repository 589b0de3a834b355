/* Host -> kernel -> host ping-pong through mapped host memory, as the resident kernel's
 * descriptor and completion travel: the host writes a 64-byte descriptor (copies: that many
 * copies, one cache line each), one warp polls it with M polls in flight (stagger: ns between
 * their first issues; with M = 1, ns between polls) and writes an acknowledgement the host
 * waits for. Arrivals are 0-3 us apart at random. argv[1] = wc: the descriptor in
 * write-combined memory. Build: nvcc -O2 -arch=sm_90 -o bench/poll_probe bench/poll_probe.cu
 * (session 18). */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <time.h>
#define CK(x) do { cudaError_t e_ = (x); if (cudaSuccess != e_) { fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); exit(1);} } while (0)
__device__ __forceinline__ void ld16(const void *p, uint64_t &x, uint64_t &y)
{ asm volatile("ld.volatile.global.v2.u64 {%0, %1}, [%2];" : "=l"(x), "=l"(y) : "l"(p)); }
__device__ __forceinline__ uint64_t gns(void) { uint64_t t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t; }
/* desc: copies x 8 words (64 B each); ack: one word. M polls in flight, stagger ns apart */
template <int M>
__global__ void pong(const uint64_t *desc, int copies, volatile uint64_t *ack, uint64_t n, unsigned stagger, unsigned long long *polls)
{
    const unsigned lane = threadIdx.x;
    uint64_t q[M], f[M];
    unsigned long long np = 0;
    for (uint64_t k = 1; k <= n; ++k) {
#pragma unroll
        for (int j = 0; j < M; ++j) {
            if (lane < 4) ld16(desc + 8 * (j % copies) + 2 * lane, q[j], f[j]);
            if (j + 1 < M && stagger) __nanosleep(stagger);
        }
        for (bool done = false; !done;) {
#pragma unroll
            for (int j = 0; j < M && !done; ++j) {
                ++np;
                if (__all_sync(0xffffffffu, lane >= 4 || q[j] == k)) { done = true; break; }
                if (M == 1 && stagger) __nanosleep(stagger);
                if (lane < 4) ld16(desc + 8 * (j % copies) + 2 * lane, q[j], f[j]);
            }
        }
        if (0 == lane) { *ack = k; __threadfence_system(); }
    }
    if (0 == lane) *polls = np;
}
static double now_us(void){ struct timespec ts; clock_gettime(CLOCK_MONOTONIC, &ts); return ts.tv_sec*1e6+ts.tv_nsec*1e-3; }
#include <immintrin.h>
#include <string.h>
int main(int argc, char **argv)
{
    const int wc = argc > 1 && !strcmp(argv[1], "wc");
    const uint64_t n = 20000;
    uint64_t *desc_h, *desc_d; volatile uint64_t *ack_h; uint64_t *ack_d; unsigned long long *polls;
    CK(cudaHostAlloc((void **) &desc_h, 8 * 64, cudaHostAllocMapped | (wc ? cudaHostAllocWriteCombined : 0)));
    printf("descriptor memory: %s\n", wc ? "write-combined" : "cached");
    CK(cudaHostGetDevicePointer((void **) &desc_d, desc_h, 0));
    CK(cudaHostAlloc((void **) &ack_h, 64, cudaHostAllocMapped));
    CK(cudaHostGetDevicePointer((void **) &ack_d, (void *) ack_h, 0));
    CK(cudaMallocManaged((void **) &polls, 8));
    struct { int m, copies; unsigned stagger; } v[] = {{1,1,0},{1,1,100},{1,1,300},{1,1,600},{2,2,300},{1,1,0}};
    for (unsigned r = 0; r < sizeof(v) / sizeof(v[0]); ++r) {
        for (int i = 0; i < 64; ++i) desc_h[i] = 0;
        *ack_h = 0;
        switch (v[r].m) {
        case 1: pong<1><<<1, 32>>>(desc_d, v[r].copies, ack_d, n, v[r].stagger, polls); break;
        case 2: pong<2><<<1, 32>>>(desc_d, v[r].copies, ack_d, n, v[r].stagger, polls); break;
        case 4: pong<4><<<1, 32>>>(desc_d, v[r].copies, ack_d, n, v[r].stagger, polls); break;
        default: pong<8><<<1, 32>>>(desc_d, v[r].copies, ack_d, n, v[r].stagger, polls); break;
        }
        CK(cudaGetLastError());
        double tot = 0, tmin = 1e9;
        unsigned seed = 12345;
        for (uint64_t k = 1; k <= n; ++k) {
            seed = seed * 1103515245u + 12345u;
            const double d0 = now_us(), wait = (seed >> 16) % 3000 / 1000.0; /* 0-3 us apart */
            while (now_us() - d0 < wait) {}
            const double t0 = now_us();
            for (int c = 0; c < v[r].copies; ++c)
                for (int p = 0; p < 4; ++p) __atomic_store_n(&desc_h[8 * c + 2 * p], k, __ATOMIC_RELEASE);
            if (wc) _mm_sfence();
            while (*ack_h != k) {}
            const double t = now_us() - t0;
            tot += t; tmin = t < tmin ? t : tmin;
        }
        CK(cudaDeviceSynchronize());
        printf("polls in flight %d, copies %d, stagger/sleep %3u ns: round trip mean %.3f us, min %.3f, polls a call %.1f\n",
               v[r].m, v[r].copies, v[r].stagger, tot / n, tmin, (double) *polls / n);
    }
    return 0;
}
