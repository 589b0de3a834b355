/*
 * bench_sliced_copies: which copies wait for another process's time slice on a GPU that
 * processes share without MPS (the case where coll/gpu stages device buffers through host
 * copies). N processes (forked before CUDA starts, all on device 0) run the same copy at
 * once, N/A rows included; each row is one form of a copy, timed from its enqueue to the
 * end of a legacy-stream synchronize (us, the mean of ITERS, process 0's view), and its
 * bytes checked after the timed loop.
 *
 *   bench/bench_sliced_copies [NPROC (2)] [ITERS (40)]
 *
 * No MPI: the processes meet at a spinning barrier in shared memory before and after each
 * row, so every row runs with all N processes copying.
 */
#include <cuda.h>
#include <cuda_runtime.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

namespace {

std::atomic<int> *arrived;
int nproc = 2;

void meet(int *round)
{
    const int r = ++*round;
    arrived->fetch_add(1);
    while (arrived->load() < r * nproc) {
    }
}

double now_us()
{
    timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double) t.tv_sec * 1e6 + (double) t.tv_nsec / 1e3;
}

enum form {
    H2D_RUN_PINNED,     /* cudaMemcpyAsync, pinned source */
    H2D_RUN_PAGEABLE,   /* cudaMemcpyAsync, malloc'd source */
    H2D_ROWS_PINNED,    /* cudaMemcpy2DAsync, two rows of half (an odd byte: two rows of 1) */
    H2D_ROWS_PAGEABLE,  /* the same from malloc'd memory */
    H2D_WRITE_OPS,      /* cuStreamBatchMemOp 8-byte writes (up to 1 KiB) */
    MEMSET,             /* cudaMemsetAsync of the first byte's value */
    D2D,                /* cudaMemcpyAsync device to device */
    D2H_PINNED,         /* cudaMemcpyAsync into pinned memory */
    D2H_PAGEABLE,       /* cudaMemcpyAsync into malloc'd memory */
    UP_AND_DOWN,        /* a device-to-host and a host-to-device copy (pinned, one run each)
                         * on two streams at once: what a staged allreduce moves */
    NFORMS
};
const char *form_name[NFORMS] = {"h2d_run_pinned",    "h2d_run_pageable", "h2d_2rows_pinned",
                                 "h2d_2rows_pageable", "h2d_write_ops",    "memset",
                                 "d2d",                "d2h_pinned",       "d2h_pageable",
                                 "up_and_down"};

char *dev, *dev2, *pinned, *pinned2, *pageable;
const cudaStream_t L = cudaStreamLegacy;
cudaStream_t up, down;

cudaError_t two_rows(char *dst, const char *src, size_t n)
{
    const size_t half = n / 2;
    cudaError_t e = cudaMemcpy2DAsync(dst, half, src, half, half, 2, cudaMemcpyHostToDevice, L);
    if (cudaSuccess == e && (n & 1)) {
        e = cudaMemcpy2DAsync(dst + n - 2, 1, src + n - 2, 1, 1, 2, cudaMemcpyHostToDevice, L);
    }
    return e;
}

/* one copy of n bytes in form f, enqueued and synchronized; false where f does not apply */
bool applies(int f, size_t n)
{
    return !((f == H2D_ROWS_PINNED || f == H2D_ROWS_PAGEABLE) && n < 2) &&
           !(f == H2D_WRITE_OPS && (n % 8 || n > 1024)) && !(f == MEMSET && n > 1) &&
           !(f == UP_AND_DOWN && n < 65536);
}

cudaError_t run(int f, size_t n)
{
    cudaError_t e = cudaSuccess;
    switch (f) {
    case H2D_RUN_PINNED: e = cudaMemcpyAsync(dev, pinned, n, cudaMemcpyHostToDevice, L); break;
    case H2D_RUN_PAGEABLE: e = cudaMemcpyAsync(dev, pageable, n, cudaMemcpyHostToDevice, L); break;
    case H2D_ROWS_PINNED: e = two_rows(dev, pinned, n); break;
    case H2D_ROWS_PAGEABLE: e = two_rows(dev, pageable, n); break;
    case H2D_WRITE_OPS: {
        CUstreamBatchMemOpParams ops[128];
        memset(ops, 0, sizeof(ops));
        const unsigned k = (unsigned) (n / 8);
        for (unsigned i = 0; i < k; ++i) {
            ops[i].operation = CU_STREAM_MEM_OP_WRITE_VALUE_64;
            ops[i].writeValue.address = (CUdeviceptr) (dev + 8 * i);
            memcpy(&ops[i].writeValue.value64, pinned + 8 * i, 8);
        }
        e = CUDA_SUCCESS == cuStreamBatchMemOp(CU_STREAM_LEGACY, k, ops, 0) ? cudaSuccess
                                                                            : cudaErrorUnknown;
        break;
    }
    case MEMSET: e = cudaMemsetAsync(dev, pinned[0], n, L); break;
    case D2D: e = cudaMemcpyAsync(dev, dev2, n, cudaMemcpyDeviceToDevice, L); break;
    case D2H_PINNED: e = cudaMemcpyAsync(pinned, dev, n, cudaMemcpyDeviceToHost, L); break;
    case D2H_PAGEABLE: e = cudaMemcpyAsync(pageable, dev, n, cudaMemcpyDeviceToHost, L); break;
    case UP_AND_DOWN:
        e = cudaMemcpyAsync(pinned2, dev2, n, cudaMemcpyDeviceToHost, up);
        if (cudaSuccess == e) {
            e = cudaMemcpyAsync(dev, pinned, n, cudaMemcpyHostToDevice, down);
        }
        if (cudaSuccess == e) {
            e = cudaStreamSynchronize(up);
        }
        return cudaSuccess == e ? cudaStreamSynchronize(down) : e;
    }
    return cudaSuccess == e ? cudaStreamSynchronize(L) : e;
}

/* the bytes that form f should have left where it wrote */
bool landed(int f, size_t n, const char *expect)
{
    static char back[8 << 20];
    const char *got = back;
    if (f == D2H_PINNED) {
        got = pinned;
    } else if (f == D2H_PAGEABLE) {
        got = pageable;
    } else if (cudaSuccess != cudaMemcpy(back, dev, n, cudaMemcpyDeviceToHost)) {
        return false;
    }
    if (f == UP_AND_DOWN && (cudaSuccess != cudaMemcpy(back + n, dev2, n, cudaMemcpyDeviceToHost) ||
                             0 != memcmp(pinned2, back + n, n))) {
        return false; /* the device-to-host half */
    }
    return 0 == memcmp(got, expect, n);
}

} // namespace

int main(int argc, char **argv)
{
    nproc = argc > 1 ? atoi(argv[1]) : 2;
    const int iters = argc > 2 ? atoi(argv[2]) : 40;
    if (nproc < 1 || iters < 1) {
        fprintf(stderr, "usage: bench_sliced_copies [NPROC] [ITERS]\n");
        return 2;
    }
    arrived = (std::atomic<int> *) mmap(NULL, 4096, PROT_READ | PROT_WRITE,
                                        MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    int me = 0;
    for (int i = 1; i < nproc; ++i) {
        if (0 == fork()) {
            me = i;
            break;
        }
    }
    const size_t max = 4 << 20;
    static char expect[4 << 20], devside[4 << 20];
    if (cudaSuccess != cudaSetDevice(0) || cudaSuccess != cudaMalloc(&dev, max) ||
        cudaSuccess != cudaMalloc(&dev2, max) || cudaSuccess != cudaMallocHost(&pinned, max) ||
        cudaSuccess != cudaMallocHost(&pinned2, max) ||
        cudaSuccess != cudaStreamCreateWithFlags(&up, cudaStreamNonBlocking) ||
        cudaSuccess != cudaStreamCreateWithFlags(&down, cudaStreamNonBlocking)) {
        printf("bench_sliced_copies: skipped: no GPU\n");
        return 77;
    }
    pageable = (char *) malloc(max);
    for (size_t i = 0; i < max; ++i) {
        pinned[i] = pageable[i] = (char) (i * 7 + 1);
        devside[i] = (char) (i * 13 + 5 + me);
    }
    const size_t sizes[] = {1, 8, 128, 1024, 16384, 32768, 65536, 262144, 2 << 20};
    int round = 0, bad = 0;
    if (0 == me) {
        printf("# %d processes on device 0 at once, us a copy incl. a legacy-stream sync "
               "(mean of %d, process 0)\n%-20s %9s %9s\n",
               nproc, iters, "form", "bytes", "us");
    }
    for (int f = 0; f < NFORMS; ++f) {
        for (size_t n : sizes) {
            if (!applies(f, n)) {
                continue;
            }
            /* the source the form reads, and what must land */
            const bool d2h = f == D2H_PINNED || f == D2H_PAGEABLE;
            if (d2h || f == D2D || f == UP_AND_DOWN) {
                cudaMemcpy(d2h ? dev : dev2, devside, n, cudaMemcpyHostToDevice);
            }
            if (f == UP_AND_DOWN) {
                memset(pinned2, 0, n);
            }
            memcpy(expect, d2h || f == D2D ? devside : pinned, n);
            cudaError_t e = run(f, n);
            meet(&round);
            double t = 0;
            for (int i = 0; i < iters && cudaSuccess == e; ++i) {
                const double t0 = now_us();
                e = run(f, n);
                t += now_us() - t0;
            }
            meet(&round);
            const bool ok = cudaSuccess == e && landed(f, n, expect);
            bad += !ok;
            if (0 == me) {
                printf("%-20s %9zu %9.1f%s\n", form_name[f], n, t / iters,
                       ok ? "" : "  WRONG BYTES OR ERROR");
                fflush(stdout);
            }
        }
    }
    if (0 == me) {
        for (int i = 1; i < nproc; ++i) {
            int st = 0;
            wait(&st);
            bad += !(WIFEXITED(st) && 0 == WEXITSTATUS(st));
        }
    }
    return bad ? 1 : 0;
}
