/*
 * coll/gpu unit tests: the parts of the cuda backend's plans that the host computes and
 * the kernels must agree with, checked on the host (no GPU needed):
 *   - the copy-engine pieces of the 2-rank reduce and of each half of the 2-rank allreduce
 *     (cgpu_cuda_ce_half, cgpu_cuda_ce_npieces, cgpu_cuda_ce_start): every element in
 *     exactly one piece, boundaries on the 16-element grid, the last piece the small one;
 *   - the resident kernel's descriptor tags (cgpu_cuda_resident_mix): a part read whole
 *     checks, a part read half old and half new fails its check unless it holds the same
 *     field, and the packed count/blocks/exit word round-trips;
 *   - the ring and chain plans (cgpu_cuda_ring_plan): coverage, the grid, the chain's steps;
 *   - the oneshot limits of the other collectives (cgpu_cuda_small_limit).
 */
#include <CUnit/Basic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cgpu_cuda_comm.h"
#include "cunit_run.h"
#include "cgpu_cuda_kernels.h"

/* pieces of `count` elements numbered as the kernels number them, with `n` pieces */
static void check_pieces(size_t count, size_t lo, size_t hi, int n)
{
    size_t prev = 0;
    for (int p = 0; p < n; ++p) {
        const size_t a = cgpu_cuda_ce_start(count, lo, hi, n, p);
        const size_t b = cgpu_cuda_ce_start(count, lo, hi, n, p + 1);
        CU_ASSERT_EQUAL(a, prev); /* contiguous, in order */
        CU_ASSERT(b >= a);
        CU_ASSERT(0 == a % 16); /* whole vectors from the start */
        if (b - a > hi + 16) {  /* no piece beyond the largest size (but for the grid) */
            CU_FAIL("a piece larger than hi");
        }
        prev = b;
    }
    CU_ASSERT_EQUAL(prev, count); /* every element once */
    if (count > 0 && n > 1) {     /* the last piece is the small one */
        const size_t last = count - cgpu_cuda_ce_start(count, lo, hi, n, n - 1);
        CU_ASSERT(last <= lo + 16);
    }
}

static void test_ce_pieces(void)
{
    const size_t es[] = {1, 2, 4, 8, 16};
    const size_t counts[] = {1,
                             15,
                             16,
                             17,
                             1000,
                             65536,
                             1000003,
                             (size_t) 3 << 20,
                             (size_t) 1 << 27,
                             ((size_t) 1 << 28) + 7};
    for (size_t e = 0; e < sizeof(es) / sizeof(es[0]); ++e) {
        const size_t lo = ((size_t) 2 << 20) / es[e], hi = ((size_t) 64 << 20) / es[e];
        for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); ++c) {
            const size_t count = counts[c];
            check_pieces(count, lo, hi, cgpu_cuda_ce_npieces(count, lo, hi));
        }
    }
}

/* the allreduce: each half cut in as many pieces as the larger half needs (both ranks count
 * them alike); the halves meet at a vector boundary and cover the buffer */
static void test_ce_allreduce_halves(void)
{
    const size_t counts[] = {
        32, 33, 47, 48, 100, 4097, 1000003, (size_t) 16 << 20, ((size_t) 1 << 27) + 5};
    for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); ++c) {
        const size_t count = counts[c], es = 4;
        const size_t lo = ((size_t) 2 << 20) / es, hi = ((size_t) 64 << 20) / es;
        const size_t mid = cgpu_cuda_ce_half(count);
        CU_ASSERT(0 == mid % 16);
        CU_ASSERT(mid > 0 && mid <= count - mid); /* the second half is the larger */
        CU_ASSERT(count - mid - mid < 32);        /* and by less than two vectors */
        const int n = cgpu_cuda_ce_npieces(count - mid, lo, hi);
        CU_ASSERT(n >= cgpu_cuda_ce_npieces(mid, lo, hi));
        check_pieces(mid, lo, hi, n);
        check_pieces(count - mid, lo, hi, n);
    }
}

static uint64_t rnd(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void test_resident_tags(void)
{
    uint64_t s = 0x9e3779b97f4a7c15ull;
    unsigned torn_passed = 0;
    for (int i = 0; i < 200000; ++i) {
        const uint64_t k = 1 + rnd(&s) % 1000000;
        /* fields as the host writes them: pointers, small counts, call numbers */
        uint64_t f_old, f_new;
        switch (i % 4) {
        case 0:
            f_old = 0x7f0000000000ull + (rnd(&s) & 0xffffff) * 256;
            f_new = 0x7f0000000000ull + (rnd(&s) & 0xffffff) * 256;
            break;
        case 1:
            f_old = (rnd(&s) % 65536) | (uint64_t) (1 + rnd(&s) % 8)
                                            << CGPU_CUDA_RESIDENT_BLOCKS_SHIFT;
            f_new = (rnd(&s) % 65536) | (uint64_t) (1 + rnd(&s) % 8)
                                            << CGPU_CUDA_RESIDENT_BLOCKS_SHIFT;
            break;
        case 2:
            f_old = k + 1000;
            f_new = k + 1001;
            break;
        default: /* a change of the field by exactly the change of the number (a count
                  * from 6 to 7 with k odd): a plain xor of number and field misses it */
            f_old = rnd(&s) % 65536;
            f_new = f_old ^ ((k - 1) ^ k);
            break;
        }
        const uint64_t tag_old = (k - 1) ^ cgpu_cuda_resident_mix(f_old);
        const uint64_t tag_new = k ^ cgpu_cuda_resident_mix(f_new);
        CU_ASSERT_EQUAL(tag_new ^ cgpu_cuda_resident_mix(f_new), k);     /* whole, new */
        CU_ASSERT_NOT_EQUAL(tag_old ^ cgpu_cuda_resident_mix(f_old), k); /* whole, old */
        if (f_old != f_new) {
            torn_passed += (tag_new ^ cgpu_cuda_resident_mix(f_old)) == k; /* new tag, old field */
            torn_passed += (tag_old ^ cgpu_cuda_resident_mix(f_new)) == k; /* old tag, new field */
        }
    }
    CU_ASSERT_EQUAL(torn_passed, 0);
}

/* every field of the engine's word comes back with the kernel's shift and mask, whatever
 * the others hold, and the exit bit stays clear */
static void test_resident_packing(void)
{
    const uint64_t counts[] = {0, 1, 7777, 65536, (1ull << 39) - 1};
    const int roots[] = {0, 1, 17, CGPU_CUDA_MAX_RANKS - 1};
    for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); ++c) {
        for (int m = 0; m <= 2 * CGPU_CUDA_ONESHOT_ALLTOALL + 1; ++m) { /* with and without LL */
            const int mode = m / 2 | (m & 1 ? CGPU_CUDA_ONESHOT_LL | (m / 2 % CGPU_CUDA_LL_CLASSES)
                                                                         << CGPU_CUDA_LL_CLASS_SHIFT
                                            : 0);
            for (int b = 1; b <= CGPU_CUDA_MAX_ONESHOT_BLOCKS; ++b) {
                for (size_t r = 0; r < sizeof(roots) / sizeof(roots[0]); ++r) {
                    const uint64_t w = cgpu_cuda_resident_word(counts[c], mode, b, roots[r]);
                    CU_ASSERT_EQUAL(w & CGPU_CUDA_RESIDENT_COUNT_MASK, counts[c]);
                    CU_ASSERT_EQUAL((int) (w >> CGPU_CUDA_RESIDENT_MODE_SHIFT & 0xff), mode);
                    CU_ASSERT_EQUAL(CGPU_CUDA_ONESHOT_BASE(mode), m / 2);
                    if (m & 1) {
                        CU_ASSERT_EQUAL(CGPU_CUDA_LL_CLASS(mode), m / 2 % CGPU_CUDA_LL_CLASSES);
                    }
                    CU_ASSERT_EQUAL((int) (w >> CGPU_CUDA_RESIDENT_BLOCKS_SHIFT & 0xff), b);
                    CU_ASSERT_EQUAL((int) (w >> CGPU_CUDA_RESIDENT_ROOT_SHIFT & 0x7f), roots[r]);
                    CU_ASSERT_EQUAL(w & CGPU_CUDA_RESIDENT_EXIT, 0);
                    /* the gate bit is a bit of its own: set, it leaves every field as it was */
                    CU_ASSERT_EQUAL(w & CGPU_CUDA_RESIDENT_GATED, 0);
                    const uint64_t g = w | CGPU_CUDA_RESIDENT_GATED;
                    CU_ASSERT_EQUAL(g & CGPU_CUDA_RESIDENT_COUNT_MASK, counts[c]);
                    CU_ASSERT_EQUAL((int) (g >> CGPU_CUDA_RESIDENT_MODE_SHIFT & 0xff), mode);
                    CU_ASSERT_EQUAL(g & CGPU_CUDA_RESIDENT_EXIT, 0);
                }
            }
        }
    }
    CU_ASSERT_NOT_EQUAL(CGPU_CUDA_RESIDENT_EXIT & CGPU_CUDA_RESIDENT_COUNT_MASK,
                        CGPU_CUDA_RESIDENT_EXIT);
}

/* n ranks: rank i on device dev[i] (a bus id per device), MPS client or not per mps[i],
 * its device known to be time-sliced per known[i] and the application's per chosen[i]
 * (NULL: none known, every device chosen) */
static void fill_recs_known(cgpu_cuda_dev_rec_t *r, int n, const int *dev, const int *mps,
                            const int *known, const int *chosen)
{
    memset(r, 0, sizeof(*r) * (size_t) n);
    for (int i = 0; i < n; ++i) {
        snprintf(r[i].bus, sizeof(r[i].bus), "0000:%02x:00.0", 0x10 + dev[i]);
        r[i].mps = mps[i];
        r[i].sliced = NULL == known ? 0 : known[i];
        r[i].chosen = NULL == chosen ? 1 : chosen[i];
    }
}

static void fill_recs(cgpu_cuda_dev_rec_t *r, int n, const int *dev, const int *mps)
{
    fill_recs_known(r, n, dev, mps, NULL, NULL);
}

/* the reference: per device, its ranks counted, and it is sliced where their MPS answers
 * are not all 1 or some rank on it knows it is; rank i may learn it (mine[i]) where its
 * device is chosen and the same holds among the chosen ranks on it */
static int share_reference(const int *dev, const int *mps, const int *known, const int *chosen,
                           int n, bool *sliced, bool *mine)
{
    int most = 1;
    *sliced = false;
    for (int d = 0; d < 16; ++d) {
        int on = 0, clients = 0, knew = 0, c_on = 0, c_clients = 0;
        for (int i = 0; i < n; ++i) {
            on += dev[i] == d;
            clients += dev[i] == d && 1 == mps[i];
            knew += dev[i] == d && known[i];
            c_on += dev[i] == d && chosen[i];
            c_clients += dev[i] == d && chosen[i] && 1 == mps[i];
        }
        most = on > most ? on : most;
        *sliced = *sliced || (on > 1 && clients < on) || knew > 0;
        for (int i = 0; i < n; ++i) {
            if (dev[i] == d) {
                mine[i] = chosen[i] && ((c_on > 1 && c_clients < c_on) || knew > 0);
            }
        }
    }
    return most;
}

/* which ranks share a device, and whether the GPU would time-slice their kernels */
static void test_share_plan(void)
{
    cgpu_cuda_dev_rec_t r[8];
    const size_t st = sizeof(r[0]);
    bool sliced;
    const int one_each[4] = {0, 1, 2, 3}, no_mps[4] = {0, 0, 0, 0};
    fill_recs(r, 4, one_each, no_mps);
    /* a GPU each: no MPS needed */
    CU_ASSERT_EQUAL(cgpu_cuda_share_plan(r, st, 4, &sliced, -1, NULL), 1);
    CU_ASSERT_FALSE(sliced);
    const int two_two[4] = {0, 0, 1, 1}, all_mps[4] = {1, 1, 1, 1};
    fill_recs(r, 4, two_two, no_mps);
    /* 4 ranks, 2 GPUs, no MPS */
    CU_ASSERT_EQUAL(cgpu_cuda_share_plan(r, st, 4, &sliced, -1, NULL), 2);
    CU_ASSERT_TRUE(sliced);
    fill_recs(r, 4, two_two, all_mps);
    CU_ASSERT_EQUAL(cgpu_cuda_share_plan(r, st, 4, &sliced, -1, NULL), 2); /* the same under MPS */
    CU_ASSERT_FALSE(sliced);
    const int one_unknown[4] = {1, -1, 1, 1}, one_gpu_no_mps[4] = {1, 1, 0, 1};
    fill_recs(r, 4, two_two, one_unknown);
    (void) cgpu_cuda_share_plan(r, st, 4, &sliced, -1, NULL); /* unknown counts as no MPS */
    CU_ASSERT_TRUE(sliced);
    fill_recs(r, 4, two_two, one_gpu_no_mps);
    /* one shared GPU without it is enough */
    (void) cgpu_cuda_share_plan(r, st, 4, &sliced, -1, NULL);
    CU_ASSERT_TRUE(sliced);
    const int alone_no_mps[4] = {0, 0, 1, 2}, mixed[4] = {1, 1, 0, 0};
    fill_recs(r, 4, alone_no_mps, mixed);
    /* the ranks alone need no MPS */
    CU_ASSERT_EQUAL(cgpu_cuda_share_plan(r, st, 4, &sliced, -1, NULL), 2);
    CU_ASSERT_FALSE(sliced);
    /* unknown bus ids ("?rank", cgpu_cuda_comm_setup) share nothing */
    memset(r, 0, sizeof(r));
    for (int i = 0; i < 3; ++i) {
        snprintf(r[i].bus, sizeof(r[i].bus), "?%d", i);
    }
    CU_ASSERT_EQUAL(cgpu_cuda_share_plan(r, st, 3, &sliced, -1, NULL), 1);
    CU_ASSERT_FALSE(sliced);
    /* records inside larger ones (each rank's entry of the first exchange), read with its
     * stride */
    struct {
        char before[24];
        cgpu_cuda_dev_rec_t dev;
        uint64_t after;
    } in[4];
    memset(in, 0, sizeof(in));
    fill_recs(r, 4, two_two, no_mps);
    for (int i = 0; i < 4; ++i) {
        in[i].dev = r[i];
    }
    CU_ASSERT_EQUAL(cgpu_cuda_share_plan(&in[0].dev, sizeof(in[0]), 4, &sliced, -1, NULL), 2);
    CU_ASSERT_TRUE(sliced);
    /* np 4 on 2 GPUs split into pairs on GPUs 0 and 1: each pair's ranks have a GPU each,
     * yet each GPU also runs the other pair's rank; the ranks that learnt it from the world
     * communicator say so, and the pair takes the staged path */
    const int pair[2] = {0, 1}, pair_mps[2] = {0, 0}, knew[2] = {1, 1}, knew_one[2] = {0, 1};
    bool mine;
    fill_recs(r, 2, pair, pair_mps);
    CU_ASSERT_EQUAL(cgpu_cuda_share_plan(r, st, 2, &sliced, 0, &mine), 1); /* not known yet */
    CU_ASSERT_FALSE(sliced);
    CU_ASSERT_FALSE(mine);
    fill_recs_known(r, 2, pair, pair_mps, knew, NULL);
    CU_ASSERT_EQUAL(cgpu_cuda_share_plan(r, st, 2, &sliced, 1, &mine), 1);
    CU_ASSERT_TRUE(sliced);
    CU_ASSERT_TRUE(mine);
    fill_recs_known(r, 2, pair, pair_mps, knew_one, NULL); /* one rank knowing is enough */
    CU_ASSERT_EQUAL(cgpu_cuda_share_plan(r, st, 2, &sliced, 0, &mine), 1);
    CU_ASSERT_TRUE(sliced);
    CU_ASSERT_FALSE(mine); /* rank 0's own GPU is not known to be shared */
    /* a set-up on host buffers before the application chose its devices (Open MPI's
     * allgather inside MPI_Comm_split_type): every rank names device 0 and none is chosen.
     * That communicator stages (as before), but no rank learns that its GPU is shared:
     * later communicators, once each rank has its own GPU, keep the kernels */
    const int all_dev0[4] = {0, 0, 0, 0}, none[4] = {0, 0, 0, 0};
    fill_recs_known(r, 4, all_dev0, no_mps, NULL, none);
    CU_ASSERT_EQUAL(cgpu_cuda_share_plan(r, st, 4, &sliced, 2, &mine), 4);
    CU_ASSERT_TRUE(sliced);
    CU_ASSERT_FALSE(mine);
    const int half[4] = {1, 0, 1, 0}; /* ranks 0 and 2 chose device 0 */
    fill_recs_known(r, 4, all_dev0, no_mps, NULL, half);
    (void) cgpu_cuda_share_plan(r, st, 4, &sliced, 0, &mine);
    CU_ASSERT_TRUE(mine);
    (void) cgpu_cuda_share_plan(r, st, 4, &sliced, 1, &mine); /* rank 1 did not choose */
    CU_ASSERT_FALSE(mine);
    /* random layouts against the reference, each rank's own answer too */
    unsigned seed = 12345;
    for (int t = 0; t < 4000; ++t) {
        const int n = 1 + (int) ((seed = seed * 1103515245u + 12345u) >> 16) % 8;
        int dev[8], mps[8], known[8] = {0}, chosen[8];
        for (int i = 0; i < n; ++i) {
            dev[i] = (int) ((seed = seed * 1103515245u + 12345u) >> 16) % 4;
            mps[i] = (int) ((seed = seed * 1103515245u + 12345u) >> 16) % 3 - 1;
            chosen[i] = t < 1000 || 0 != ((seed = seed * 1103515245u + 12345u) >> 16) % 4;
            if (t >= 2000 && chosen[i]) { /* the second half: some ranks already know (only
                                           * a chosen record ever says so) */
                known[i] = 0 == ((seed = seed * 1103515245u + 12345u) >> 16) % 5;
            }
        }
        bool want, want_mine[8];
        const int most = share_reference(dev, mps, known, chosen, n, &want, want_mine);
        fill_recs_known(r, n, dev, mps, known, chosen);
        const int me = t % n;
        CU_ASSERT_EQUAL(cgpu_cuda_share_plan(r, st, n, &sliced, me, &mine), most);
        CU_ASSERT_EQUAL(sliced, want);
        CU_ASSERT_EQUAL(mine, want_mine[me]);
    }
}

/* The ring/chain plan (cgpu_cuda_ring_plan): every element in some step of some round and
 * no round empty; steps on the 16-byte grid, never over a slot; the ring's and the 2-rank
 * chain's plans those of whole-slot steps (reference: the plain arithmetic below); a chain of
 * 3+ ranks in at most 16 steps a piece where the floor and the slot allow, none under the
 * floor unless the piece is smaller. */
static void test_ring_plan(void)
{
    const size_t ch_min = 8192, nch_max = 64, slot = 262144, chain_chunk = 65536;
    const size_t counts[] = {1,      3,        13,       1000,      4097,      65537,
                             131072, 1u << 20, 5u << 20, 16u << 20, 64u << 20, 1u << 30};
    const size_t esizes[] = {1, 2, 4, 8, 16};
    for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ++ci) {
        for (size_t ei = 0; ei < sizeof(esizes) / sizeof(esizes[0]); ++ei) {
            for (size_t n = 2; n <= 8; ++n) {
                for (int mode = 0; mode < 3; ++mode) { /* 0 allreduce, 1 other ring, 2 chain */
                    const size_t count = counts[ci] / esizes[ei] > 0 ? counts[ci] / esizes[ei] : 1;
                    const size_t es = esizes[ei], pieces = 0 == mode ? n : 1;
                    const bool chain = 2 == mode;
                    const cgpu_cuda_ring_plan_t p = cgpu_cuda_ring_plan(
                        count, es, pieces, ch_min, nch_max, slot, chain, n, chain_chunk);
                    const size_t align = 16 / es > 0 ? 16 / es : 1;
                    const size_t slot_elems = slot / es / align * align;
                    /* the reference: channels while each keeps ch_min a piece, whole slots */
                    size_t nch = (count * es + pieces * ch_min - 1) / (pieces * ch_min);
                    nch = nch < 1 ? 1 : nch > nch_max ? nch_max : nch;
                    size_t per = (count + nch * pieces - 1) / (nch * pieces);
                    per = (per + align - 1) / align * align;
                    CU_ASSERT_EQUAL(p.nch, nch);
                    CU_ASSERT(p.chunk >= 1 && p.chunk <= per && p.chunk <= slot_elems);
                    CU_ASSERT_EQUAL(p.chunk % align, 0);
                    const size_t round = p.nch * pieces * p.chunk;
                    CU_ASSERT(p.nloops * round >= count);
                    CU_ASSERT((p.nloops - 1) * round < count);
                    if (!chain || n < 3) {
                        CU_ASSERT_EQUAL(p.chunk, per < slot_elems ? per : slot_elems);
                        continue;
                    }
                    const size_t least = chain_chunk / es;
                    if (per > least && least <= slot_elems) {
                        CU_ASSERT(p.chunk >= least); /* never under the floor */
                    }
                    if (per / 16 >= least && per / 16 < slot_elems) {
                        CU_ASSERT((per + p.chunk - 1) / p.chunk <= 16); /* the steps a piece */
                    }
                }
            }
        }
    }
    /* the measured points (bytes of a bcast, 4 ranks): 16 MiB in 64 KiB steps, 4 a channel;
     * 1 GiB in whole slots; 1 MiB in one step a channel; no floor: whole slots */
    cgpu_cuda_ring_plan_t p =
        cgpu_cuda_ring_plan(16u << 20, 1, 1, ch_min, nch_max, slot, true, 4, chain_chunk);
    CU_ASSERT_EQUAL(p.nch, 64);
    CU_ASSERT_EQUAL(p.chunk, 65536);
    CU_ASSERT_EQUAL(p.nloops, 4);
    p = cgpu_cuda_ring_plan(1u << 30, 1, 1, ch_min, nch_max, slot, true, 4, chain_chunk);
    CU_ASSERT_EQUAL(p.chunk, slot);
    p = cgpu_cuda_ring_plan(1u << 20, 1, 1, ch_min, nch_max, slot, true, 4, chain_chunk);
    CU_ASSERT_EQUAL(p.chunk, 16384);
    CU_ASSERT_EQUAL(p.nloops, 1);
    p = cgpu_cuda_ring_plan(16u << 20, 1, 1, ch_min, nch_max, slot, true, 4, 0);
    CU_ASSERT_EQUAL(p.chunk, slot);
    CU_ASSERT_EQUAL(p.nloops, 1);
    p = cgpu_cuda_ring_plan(16u << 20, 1, 1, ch_min, nch_max, slot, true, 2, chain_chunk);
    CU_ASSERT_EQUAL(p.chunk, slot); /* one hop: nothing to overlap */
}

/* The oneshot limit of the other collectives (cgpu_cuda_small_limit): a setting of 0 or more
 * is taken as it is; the table never sends fewer sizes oneshot with more ranks than with 2
 * (more hops and steps for the chain and ring, one exchange for the oneshot); the measured
 * points of bench/results/2026-11-28_4xH200.md. */
static void test_small_limit(void)
{
    const cgpu_cuda_small_kind_t kinds[] = {CGPU_CUDA_SMALL_CHAIN, CGPU_CUDA_SMALL_SCAN,
                                            CGPU_CUDA_SMALL_BLOCK, CGPU_CUDA_SMALL_PEER};
    for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); ++k) {
        const size_t two = cgpu_cuda_small_limit(kinds[k], 2, -1);
        CU_ASSERT(two > 0);
        for (int n = 1; n <= 72; ++n) {
            CU_ASSERT_EQUAL(cgpu_cuda_small_limit(kinds[k], n, 0), 0);
            CU_ASSERT_EQUAL(cgpu_cuda_small_limit(kinds[k], n, 12345), 12345);
            CU_ASSERT(cgpu_cuda_small_limit(kinds[k], n, -1) >= (n >= 2 ? two : 0));
        }
    }
    /* 4 ranks: a bcast of 512 KiB oneshot, of 1 MiB on the chain; an allgather of 1 MiB
     * (256 KiB blocks) oneshot; an alltoall of 512 KiB (128 KiB blocks) on its kernel. 3
     * ranks: an alltoall of 2 MiB (699,050 B blocks) oneshot. */
    CU_ASSERT(cgpu_cuda_small_limit(CGPU_CUDA_SMALL_CHAIN, 4, -1) >= (512u << 10));
    CU_ASSERT(cgpu_cuda_small_limit(CGPU_CUDA_SMALL_CHAIN, 4, -1) < (1u << 20));
    CU_ASSERT(cgpu_cuda_small_limit(CGPU_CUDA_SMALL_BLOCK, 4, -1) >= (256u << 10));
    CU_ASSERT(cgpu_cuda_small_limit(CGPU_CUDA_SMALL_PEER, 4, -1) < (128u << 10));
    CU_ASSERT(cgpu_cuda_small_limit(CGPU_CUDA_SMALL_PEER, 3, -1) >= 699050);
}

int main(void)
{
    static const cgpu_unit_case_t cases[] = {
        {"copy-engine pieces cover every element once, on the vector grid", test_ce_pieces},
        {"copy-engine allreduce halves and their pieces", test_ce_allreduce_halves},
        {"resident descriptor tags reject torn parts", test_resident_tags},
        {"resident descriptor word packing", test_resident_packing},
        {"ranks sharing a device, and time slices without MPS", test_share_plan},
        {"ring and chain plans: coverage, grid, slots, chain steps", test_ring_plan},
        {"oneshot limits by collective and ranks", test_small_limit},
    };
    return cgpu_unit_run("test_cuda_plan", cases, sizeof(cases) / sizeof(cases[0]));
}
