// The x86-64 kernel levels. Each function carries its own target attribute, so the package builds
// for baseline x86-64 and these run only where rk_x86_supported_level() says the CPU and the OS
// (saved register state) allow them.
#if defined(__x86_64__)

#include "kernels_internal.h"

#include <cpuid.h>
#include <immintrin.h>
#include <string.h>

__attribute__((target("xsave"))) static unsigned long long saved_state(void) { return _xgetbv(0); }

int rk_x86_supported_level(void) {
    unsigned int eax, ebx, ecx, edx;
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return RK_LEVEL_SCALAR;
    int osxsave = (ecx >> 27) & 1;
    if (!osxsave) return RK_LEVEL_SCALAR;
    unsigned long long xcr0 = saved_state();
    if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return RK_LEVEL_SCALAR;
    int avx2 = (ebx >> 5) & 1;
    int avx512f = (ebx >> 16) & 1, avx512dq = (ebx >> 17) & 1, avx512bw = (ebx >> 30) & 1, avx512vl = (ebx >> 31) & 1;
    int vnni = (ecx >> 11) & 1;
    int ymm = (xcr0 & 0x6) == 0x6, zmm = (xcr0 & 0xe6) == 0xe6;
    if (avx512f && avx512dq && avx512bw && avx512vl && vnni && zmm) return RK_LEVEL_AVX512_VNNI;
    if (avx2 && ymm) return RK_LEVEL_AVX2;
    return RK_LEVEL_SCALAR;
}

// ---------------------------------------------------------------------------------------------
// AVX2: |b| as unsigned bytes times c with b's sign (vpmaddubsw; a pair of products is at most
// 2·127·127 = 32,258, so the 16-bit sums never saturate), widened by vpmaddwd. One row at a time,
// two chains of additions: reading rows in order lets the hardware prefetcher stream them (measured
// on AMD EPYC: four rows interleaved read at 9.7 GB/s, one row at a time at 22 GB/s, one thread).
// ---------------------------------------------------------------------------------------------

#define AVX2 __attribute__((target("avx2")))

AVX2 static inline __m256i avx2_step(__m256i accumulator, __m256i magnitude, __m256i sign, const int8_t *row, __m256i ones) {
    __m256i codes = _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)row), sign);
    return _mm256_add_epi32(accumulator, _mm256_madd_epi16(_mm256_maddubs_epi16(magnitude, codes), ones));
}

AVX2 static inline int32_t avx2_sum(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

AVX2 void rk_dots_avx2(const rk_query *query, const int8_t *codes, const rk_row_terms *terms, size_t code_stride, size_t rows,
                       int32_t *dots) {
    (void)terms;
    const __m256i ones = _mm256_set1_epi16(1);
    for (size_t r = 0; r < rows; r++) {
        const int8_t *row = codes + r * code_stride;
        __m256i a0 = _mm256_setzero_si256(), a1 = a0;
        for (size_t i = 0; i < code_stride; i += 64) {  // code_stride is a multiple of 64
            __m256i b0 = _mm256_loadu_si256((const __m256i *)(query->codes + i));
            __m256i b1 = _mm256_loadu_si256((const __m256i *)(query->codes + i + 32));
            a0 = avx2_step(a0, _mm256_sign_epi8(b0, b0), b0, row + i, ones);
            a1 = avx2_step(a1, _mm256_sign_epi8(b1, b1), b1, row + i + 32, ones);
        }
        dots[r] = avx2_sum(_mm256_add_epi32(a0, a1));
    }
}

AVX2 size_t rk_prefilter_avx2(const rk_query *query, const int8_t *codes, const rk_row_terms *terms, size_t code_stride, size_t rows,
                              double dot_cutoff, uint32_t *survivors) {
    return rk_prefilter_blocks(rk_dots_avx2, query, codes, terms, code_stride, rows, dot_cutoff, survivors);
}

// ---------------------------------------------------------------------------------------------
// AVX2, many queries over one prepared block (the batched registration check). The one-query kernel
// above spends much of a row on its horizontal sum, and at best it does one vpmaddubsw and one
// vpmaddwd (the multiplier's two instructions) per 32 products; we take the multiplier to bound
// this kernel (this machine has no counters to confirm it; fewer multiplier instructions did make it
// faster). Here the rows go across the lanes instead: sixteen rows at a time are transposed
// so that each 32-bit lane holds four codes of one row, biased to unsigned (c + 128, at most 255),
// and a query's four codes are broadcast. The query's codes are its five-bit ones (|b| ≤ 15), so four
// vpmaddubsw results add up in 16 bits (4 · 2 · 255 · 15 = 30,600 < 32,768) before one vpmaddwd
// widens them: five multiplier instructions per 128 products instead of eight, no horizontal sums,
// each vector of rows serving two queries, and no bias correction but one per query (Σ(c + 128)·b =
// b·c + 128·Σb). Those coarse codes give a bound of their own (the same derivation with the coarse
// scale and residual), looser but as valid; a row that passes its integer test and bound gets its
// exact eight-bit dot product (rk_dots_avx2) and the ordinary bound, which decides. So a survivor is
// a row both bounds keep: what rk_prefilter keeps, less the rows the coarse bound already excludes.
// ---------------------------------------------------------------------------------------------

/// Rows transposed at once.
#define TILE_ROWS 16
/// The largest code_stride the tiled kernel takes (32 KiB of transposed rows on the stack); above it,
/// query by query.
#define TILE_MAX_STRIDE 2048
/// Transposing a tile costs about as much as the products of one query per this many bytes of codes
/// per row (measured: at 128 floats the tiled kernel pays from two queries, at 512 from four): fewer
/// queries go query by query.
#define TILE_BYTES_PER_QUERY 128
/// Queries per pass over the block (their state on the stack).
#define TILE_QUERIES 64
/// Four-byte steps whose vpmaddubsw results are added in 16 bits before widening.
#define COARSE_STEPS 4

int rk_avx2_block_is_coarse(size_t query_count, size_t code_stride) {
    return query_count >= 2 && query_count * TILE_BYTES_PER_QUERY >= code_stride && code_stride <= TILE_MAX_STRIDE;
}

/// Transposes `rows` (at most TILE_ROWS; the rest taken as zero rows) rows of codes, biased to
/// unsigned: tile[2k] holds the four bytes k of rows 0–7, one row per lane, tile[2k + 1] those of
/// rows 8–15.
AVX2 static void transpose_tile(const int8_t *codes, size_t code_stride, size_t rows, __m256i *tile) {
    static const int8_t zeros[32] = {0};
    const __m256i bias = _mm256_set1_epi8((char)0x80);
    for (size_t i = 0; i < code_stride; i += 32) {  // eight four-byte groups of every row at a time
        for (int half = 0; half < 2; half++) {
            __m256i r[8];
            for (int j = 0; j < 8; j++) {
                size_t row = (size_t)half * 8 + (size_t)j;
                const int8_t *source = row < rows ? codes + row * code_stride + i : zeros;
                r[j] = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)source), bias);  // groups 0–3 | 4–7 of the row
            }
            // An 8×8 transposition of 32-bit elements: u[m] ends with group m (low half) and m + 4 (high).
            __m256i t[8], u[8];
            for (int j = 0; j < 8; j += 2) {
                t[j] = _mm256_unpacklo_epi32(r[j], r[j + 1]);
                t[j + 1] = _mm256_unpackhi_epi32(r[j], r[j + 1]);
            }
            for (int j = 0; j < 8; j += 4) {
                u[j] = _mm256_unpacklo_epi64(t[j], t[j + 2]);
                u[j + 1] = _mm256_unpackhi_epi64(t[j], t[j + 2]);
                u[j + 2] = _mm256_unpacklo_epi64(t[j + 1], t[j + 3]);
                u[j + 3] = _mm256_unpackhi_epi64(t[j + 1], t[j + 3]);
            }
            __m256i *out = tile + (i / 4) * 2 + (size_t)half;
            for (int m = 0; m < 4; m++) {
                out[2 * m] = _mm256_permute2x128_si256(u[m], u[m + 4], 0x20);
                out[2 * (m + 4)] = _mm256_permute2x128_si256(u[m], u[m + 4], 0x31);
            }
        }
    }
}

/// Per query of a tiled pass.
typedef struct {
    const rk_query *query;
    /// Its coarse codes as a query of their own (for rk_bound and rk_least_dot).
    rk_query coarse;
    double dot_cutoff;
    /// Per group of the block, the coarse integer test's least Σ(c + 128)·b, clamped to 32 bits.
    int32_t least[RK_BLOCK_ROWS / RK_BLOCK];
    /// Whether any row of the group can pass.
    int live[RK_BLOCK_ROWS / RK_BLOCK];
    uint32_t *survivors;
    size_t count;
} tile_query;

/// Σ b·c from the kernel's Σ (c + 128)·b.
static inline int32_t unbiased(int32_t biased, const rk_query *query) { return biased - 128 * query->coarse_sum; }

/// Σ (c + 128)·b of `nq` (1 or 2; a constant where inlined) queries' coarse codes `coarse[j]` with
/// the sixteen rows of a transposed tile: acc[j][0] rows 0–7, acc[j][1] rows 8–15.
AVX2 static inline __attribute__((always_inline)) void tile_dots(const int8_t *const *coarse, int nq, const __m256i *tile, size_t groups,
                                                                  __m256i acc[2][2]) {
    const __m256i ones = _mm256_set1_epi16(1);
    for (int j = 0; j < nq; j++) acc[j][0] = acc[j][1] = _mm256_setzero_si256();
    for (size_t k = 0; k < groups; k += COARSE_STEPS) {  // groups is a multiple of 16
        __m256i partial[2][2];
        for (int j = 0; j < nq; j++) partial[j][0] = partial[j][1] = _mm256_setzero_si256();
        for (size_t s = k; s < k + COARSE_STEPS; s++) {
            const __m256i low = _mm256_load_si256(tile + 2 * s), high = _mm256_load_si256(tile + 2 * s + 1);
            for (int j = 0; j < nq; j++) {
                int32_t four;
                memcpy(&four, coarse[j] + 4 * s, 4);
                const __m256i b = _mm256_set1_epi32(four);
                partial[j][0] = _mm256_add_epi16(partial[j][0], _mm256_maddubs_epi16(low, b));
                partial[j][1] = _mm256_add_epi16(partial[j][1], _mm256_maddubs_epi16(high, b));
            }
        }
        for (int j = 0; j < nq; j++) {
            acc[j][0] = _mm256_add_epi32(acc[j][0], _mm256_madd_epi16(partial[j][0], ones));
            acc[j][1] = _mm256_add_epi32(acc[j][1], _mm256_madd_epi16(partial[j][1], ones));
        }
    }
}

/// The coarse dot products of `nq` (1 or 2) queries with a transposed tile, their integer test and
/// coarse bound, and for the rows that pass both the exact test.
AVX2 static inline __attribute__((always_inline)) void tile_step(tile_query *const *q, int nq, const __m256i *tile, size_t groups,
                                                                  const int8_t *codes, size_t code_stride, size_t first_row, size_t rows,
                                                                  int group, const rk_row_terms *terms) {
    __m256i acc[2][2];
    const int8_t *coarse[2] = {q[0]->query->coarse, nq > 1 ? q[1]->query->coarse : NULL};
    tile_dots(coarse, nq, tile, groups, acc);
    const unsigned valid = rows >= 16 ? 0xffffu : (1u << rows) - 1;
    for (int j = 0; j < nq; j++) {
        const __m256i least = _mm256_set1_epi32(q[j]->least[group]);
        // Lanes at or above the least (not least > acc).
        unsigned passing = (unsigned)(~_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(least, acc[j][0]))) & 0xff) |
                           (unsigned)(~_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(least, acc[j][1]))) & 0xff) << 8;
        passing &= valid;
        if (passing == 0) continue;
        int32_t biased[16];
        _mm256_storeu_si256((__m256i *)biased, acc[j][0]);
        _mm256_storeu_si256((__m256i *)(biased + 8), acc[j][1]);
        for (; passing != 0; passing &= passing - 1) {
            unsigned lane = (unsigned)__builtin_ctz(passing);
            size_t row = first_row + lane;
            int32_t coarse = unbiased(biased[lane], q[j]->query);
            if (rk_bound(&q[j]->coarse, terms + row, coarse) < q[j]->dot_cutoff) continue;
            int32_t dot;
            rk_dots_avx2(q[j]->query, codes + lane * code_stride, NULL, code_stride, 1, &dot);
            if (rk_bound(q[j]->query, terms + row, dot) >= q[j]->dot_cutoff) q[j]->survivors[q[j]->count++] = (uint32_t)row;
        }
    }
}

/// Up to TILE_QUERIES queries over the whole block, tile by tile.
AVX2 static void block_by_tiles(const rk_query *queries, size_t n, const double *dot_cutoffs, const rk_block *block, const int8_t *codes,
                                const rk_row_terms *terms, size_t code_stride, uint32_t *survivors, size_t *counts) {
    const size_t groups = code_stride / 4;
    __attribute__((aligned(32))) __m256i tile[TILE_MAX_STRIDE / 2];  // groups × 2 vectors
    tile_query state[TILE_QUERIES];
    for (size_t i = 0; i < n; i++) {
        tile_query *q = &state[i];
        q->query = &queries[i];
        q->coarse = queries[i];
        q->coarse.codes = queries[i].coarse;
        q->coarse.scale = queries[i].coarse_scale;
        q->coarse.residual = queries[i].coarse_residual;
        q->dot_cutoff = dot_cutoffs[i];
        for (size_t start = 0, group = 0; start < block->rows; start += RK_BLOCK, group++) {
            int64_t least = rk_least_dot(&q->coarse, block->largest[group], q->dot_cutoff);
            q->live[group] = least <= INT32_MAX;
            if (least != INT64_MIN) least += 128 * (int64_t)queries[i].coarse_sum;  // the bias, as the kernel sums it
            q->least[group] = least < INT32_MIN ? INT32_MIN : least > INT32_MAX ? INT32_MAX : (int32_t)least;
        }
        q->survivors = survivors + i * RK_BLOCK_ROWS;
        q->count = 0;
    }
    for (size_t start = 0; start < block->rows; start += TILE_ROWS) {
        const size_t rows = block->rows - start < TILE_ROWS ? block->rows - start : TILE_ROWS;
        const int group = (int)(start / RK_BLOCK);
        tile_query *live[TILE_QUERIES];
        size_t live_count = 0;
        for (size_t i = 0; i < n; i++) {
            if (state[i].live[group]) live[live_count++] = &state[i];
        }
        if (live_count == 0) continue;
        const int8_t *tile_codes = codes + start * code_stride;
        transpose_tile(tile_codes, code_stride, rows, tile);
        // The next tile's rows are read sixteen at a time, which the hardware prefetcher does not
        // follow: fetch them while the queries pass over this one (measured at 512 floats: 8 queries
        // over 100,000 rows in 10.8 ms instead of 17.2).
        if (start + TILE_ROWS < block->rows) {
            const size_t next = block->rows - start - TILE_ROWS < TILE_ROWS ? block->rows - start - TILE_ROWS : TILE_ROWS;
            const char *ahead = (const char *)(tile_codes + TILE_ROWS * code_stride);
            for (size_t offset = 0; offset < next * code_stride; offset += 64) _mm_prefetch(ahead + offset, _MM_HINT_T0);
        }
        size_t j = 0;
        for (; j + 2 <= live_count; j += 2) tile_step(live + j, 2, tile, groups, tile_codes, code_stride, start, rows, group, terms);
        if (j < live_count) tile_step(live + j, 1, tile, groups, tile_codes, code_stride, start, rows, group, terms);
    }
    for (size_t i = 0; i < n; i++) counts[i] = state[i].count;
}

/// The tiled kernel's integers, for tests: dots[q · rows + r] = Σ b·c of query q's coarse codes b
/// and row r's codes c.
AVX2 void rk_coarse_dots_avx2(const rk_query *queries, size_t query_count, const int8_t *codes, size_t code_stride, size_t rows,
                              int32_t *dots) {
    __attribute__((aligned(32))) __m256i tile[TILE_MAX_STRIDE / 2];
    for (size_t start = 0; start < rows; start += TILE_ROWS) {
        const size_t n = rows - start < TILE_ROWS ? rows - start : TILE_ROWS;
        transpose_tile(codes + start * code_stride, code_stride, n, tile);
        for (size_t q = 0; q < query_count; q += 2) {
            const int nq = query_count - q >= 2 ? 2 : 1;
            const int8_t *coarse[2] = {queries[q].coarse, nq > 1 ? queries[q + 1].coarse : NULL};
            __m256i acc[2][2];
            if (nq == 2) {
                tile_dots(coarse, 2, tile, code_stride / 4, acc);
            } else {
                tile_dots(coarse, 1, tile, code_stride / 4, acc);
            }
            for (int j = 0; j < nq; j++) {
                int32_t biased[16];
                _mm256_storeu_si256((__m256i *)biased, acc[j][0]);
                _mm256_storeu_si256((__m256i *)(biased + 8), acc[j][1]);
                for (size_t r = 0; r < n; r++) dots[(q + (size_t)j) * rows + start + r] = unbiased(biased[r], &queries[q + (size_t)j]);
            }
        }
    }
}

/// rk_prefilter_block at the AVX2 level: the tiled kernel, TILE_QUERIES at a time, for enough queries
/// to pay for the transposition; otherwise (and for very long rows) query by query.
AVX2 void rk_prefilter_block_avx2(const rk_query *queries, size_t query_count, const double *dot_cutoffs, const rk_block *block,
                                  const int8_t *codes, const rk_row_terms *terms, size_t code_stride, uint32_t *survivors, size_t *counts) {
    if (rk_avx2_block_is_coarse(query_count, code_stride)) {
        for (size_t first = 0; first < query_count; first += TILE_QUERIES) {
            size_t n = query_count - first < TILE_QUERIES ? query_count - first : TILE_QUERIES;
            block_by_tiles(queries + first, n, dot_cutoffs + first, block, codes, terms, code_stride, survivors + first * RK_BLOCK_ROWS,
                           counts + first);
        }
        return;
    }
    for (size_t q = 0; q < query_count; q++) {
        counts[q] = rk_prefilter_avx2(&queries[q], codes, terms, code_stride, block->rows, dot_cutoffs[q], survivors + q * RK_BLOCK_ROWS);
    }
}

// Landmark moments, four lanes (x, y, z of a slot and the next slot's x, ignored) per ymm. Multiply
// and add apart (no FMA: the scalar reference rounds each product), so the bits match it.
#pragma clang fp contract(off)
AVX2 void rk_landmark_moments_avx2(const double *lanes, const float *rows, size_t row_stride, size_t count, double *moments) {
    for (size_t r = 0; r < count; r++) {
        const float *row = rows + r * row_stride;
        __m256d mx = _mm256_setzero_pd(), my = mx, mz = mx, wb = mx, wbb = mx;
        for (int slot = 0; slot < 32; slot++) {
            // The last slot's fourth float would lie past the row: load three.
            __m128 raw = slot < 31 ? _mm_loadu_ps(row + 3 * slot) : _mm_setr_ps(row[93], row[94], row[95], 0.0f);
            __m256d b = _mm256_cvtps_pd(raw);
            const double *l = lanes + 4 * slot;
            mx = _mm256_add_pd(mx, _mm256_mul_pd(_mm256_broadcast_sd(l), b));
            my = _mm256_add_pd(my, _mm256_mul_pd(_mm256_broadcast_sd(l + 1), b));
            mz = _mm256_add_pd(mz, _mm256_mul_pd(_mm256_broadcast_sd(l + 2), b));
            __m256d weighted = _mm256_mul_pd(_mm256_broadcast_sd(l + 3), b);
            wb = _mm256_add_pd(wb, weighted);
            wbb = _mm256_add_pd(wbb, _mm256_mul_pd(weighted, b));
        }
        double *out = moments + r * RK_LANDMARK_MOMENTS;
        _mm256_storeu_pd(out, mx);
        _mm256_storeu_pd(out + 4, my);
        _mm256_storeu_pd(out + 8, mz);
        _mm256_storeu_pd(out + 12, wb);
        _mm256_storeu_pd(out + 16, wbb);
    }
}

// ---------------------------------------------------------------------------------------------
// AVX-512 VNNI: vpdpbusd multiplies unsigned by signed bytes and adds groups of four into 32-bit
// lanes without saturation. The query is biased to unsigned (b + 128), and 128·Σc is taken back off.
// One row at a time with two chains, as above.
// ---------------------------------------------------------------------------------------------

#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")))

/// Σ (b + 128)·c over one row's `code_stride` bytes: b·c + 128·Σc.
AVX512 static inline int32_t biased_dot(const rk_query *query, const int8_t *row, size_t code_stride) {
    __m512i a0 = _mm512_setzero_si512(), a1 = a0;
    size_t i = 0;
    for (; i + 128 <= code_stride; i += 128) {
        a0 = _mm512_dpbusd_epi32(a0, _mm512_loadu_si512((const void *)(query->biased + i)), _mm512_loadu_si512((const void *)(row + i)));
        a1 = _mm512_dpbusd_epi32(a1, _mm512_loadu_si512((const void *)(query->biased + i + 64)), _mm512_loadu_si512((const void *)(row + i + 64)));
    }
    if (i < code_stride) {
        a0 = _mm512_dpbusd_epi32(a0, _mm512_loadu_si512((const void *)(query->biased + i)), _mm512_loadu_si512((const void *)(row + i)));
    }
    return _mm512_reduce_add_epi32(_mm512_add_epi32(a0, a1));
}

AVX512 void rk_dots_avx512_vnni(const rk_query *query, const int8_t *codes, const rk_row_terms *terms, size_t code_stride,
                                size_t rows, int32_t *dots) {
    for (size_t r = 0; r < rows; r++) dots[r] = biased_dot(query, codes + r * code_stride, code_stride) - 128 * terms[r].code_sum;
}

/// The sums of sixteen accumulators, lane k holding accumulator k's total: pairs interleaved and
/// added (32-bit, then 64-bit), then 128-bit lanes exchanged and added twice.
AVX512 static inline __m512i sum16(const __m512i a[16]) {
    __m512i t[8], u[4];
    for (int k = 0; k < 8; k++) {
        t[k] = _mm512_add_epi32(_mm512_unpacklo_epi32(a[2 * k], a[2 * k + 1]), _mm512_unpackhi_epi32(a[2 * k], a[2 * k + 1]));
    }
    for (int m = 0; m < 4; m++) {
        u[m] = _mm512_add_epi32(_mm512_unpacklo_epi64(t[2 * m], t[2 * m + 1]), _mm512_unpackhi_epi64(t[2 * m], t[2 * m + 1]));
    }
    // Each 128-bit lane of u[m] now holds partial sums of rows 4m…4m+3.
    __m512i w0 = _mm512_add_epi32(_mm512_shuffle_i32x4(u[0], u[1], 0x88), _mm512_shuffle_i32x4(u[0], u[1], 0xdd));
    __m512i w1 = _mm512_add_epi32(_mm512_shuffle_i32x4(u[2], u[3], 0x88), _mm512_shuffle_i32x4(u[2], u[3], 0xdd));
    return _mm512_add_epi32(_mm512_shuffle_i32x4(w0, w1, 0x88), _mm512_shuffle_i32x4(w0, w1, 0xdd));
}

/// Sixteen rows at a time, for rows already in cache (the batched register check passes many
/// queries over one block): the query is loaded once per step for sixteen rows, and the sixteen
/// totals come out of one transposition instead of sixteen reductions. Not for streaming from
/// memory: interleaved rows defeat the prefetcher (see above). Lane k holds row k's biased_dot.
AVX512 static inline __m512i biased_dots16(const rk_query *query, const int8_t *rows, size_t code_stride) {
    __m512i a[16];
    for (int k = 0; k < 16; k++) a[k] = _mm512_setzero_si512();
    for (size_t i = 0; i < code_stride; i += 64) {
        __m512i b = _mm512_loadu_si512((const void *)(query->biased + i));
        for (int k = 0; k < 16; k++) a[k] = _mm512_dpbusd_epi32(a[k], b, _mm512_loadu_si512((const void *)(rows + k * code_stride + i)));
    }
    return sum16(a);
}

/// What rk_prefilter_block needs of one query over one block.
typedef struct {
    const rk_query *query;
    double dot_cutoff;
    /// Per group, the integer test's least B (INT64_MAX: no row can pass).
    int64_t least[RK_BLOCK_ROWS / RK_BLOCK];
    uint32_t *survivors;
    size_t count;
} block_query;

/// Tests rows [from, to) of one group for one query, appending the survivors: sixteen rows at a time
/// their exact integer dot products (corrected with the block's code sums) compared with the group's
/// least B at once; only the few rows at or above it get their own bound.
AVX512 static inline void test_rows(block_query *q, const rk_block *block, const int8_t *codes, const rk_row_terms *terms,
                                    size_t code_stride, size_t from, size_t to, int64_t least) {
    int32_t dots[16];
    const __m512i threshold = _mm512_set1_epi32(least < INT32_MIN ? INT32_MIN : (int32_t)least);
    size_t r = from;
    for (; r + 16 <= to; r += 16) {
        __m512i exact = _mm512_sub_epi32(biased_dots16(q->query, codes + r * code_stride, code_stride),
                                         _mm512_slli_epi32(_mm512_loadu_si512((const void *)(block->code_sum + r)), 7));
        __mmask16 passing = _mm512_cmpge_epi32_mask(exact, threshold);
        if (passing == 0) continue;
        _mm512_storeu_si512((void *)dots, exact);
        for (; passing != 0; passing &= passing - 1) {
            unsigned k = (unsigned)__builtin_ctz(passing);
            if (rk_bound(q->query, terms + r + k, dots[k]) >= q->dot_cutoff) q->survivors[q->count++] = (uint32_t)(r + k);
        }
    }
    for (; r < to; r++) {
        int32_t dot = biased_dot(q->query, codes + r * code_stride, code_stride) - 128 * block->code_sum[r];
        if ((int64_t)dot >= least && rk_bound(q->query, terms + r, dot) >= q->dot_cutoff) q->survivors[q->count++] = (uint32_t)r;
    }
}

/// Rows per step of rk_prefilter_block: every query passes over them while they are in L1 (16 KiB
/// of codes at 128 floats).
#define SUB_BLOCK 128

/// The block, query by query: per query the integer test's least B of each group from the block's
/// largest terms, then SUB_BLOCK rows at a time, every query over them.
AVX512 static void block_by_query(const rk_query *queries, size_t query_count, const double *dot_cutoffs, const rk_block *block,
                                  const int8_t *codes, const rk_row_terms *terms, size_t code_stride, uint32_t *survivors, size_t *counts) {
    for (size_t first = 0; first < query_count; first += 32) {  // 32 queries at a time: their state on the stack
        size_t n = query_count - first < 32 ? query_count - first : 32;
        block_query state[32];
        for (size_t i = 0; i < n; i++) {
            block_query *q = &state[i];
            q->query = &queries[first + i];
            q->dot_cutoff = dot_cutoffs[first + i];
            for (size_t start = 0, group = 0; start < block->rows; start += RK_BLOCK, group++) {
                q->least[group] = rk_least_dot(q->query, block->largest[group], q->dot_cutoff);
            }
            q->survivors = survivors + (first + i) * RK_BLOCK_ROWS;
            q->count = 0;
        }
        for (size_t start = 0; start < block->rows; start += SUB_BLOCK) {
            size_t end = block->rows - start < SUB_BLOCK ? block->rows : start + SUB_BLOCK;
            for (size_t i = 0; i < n; i++) {
                int64_t least = state[i].least[start / RK_BLOCK];
                if (least > INT32_MAX) continue;  // no row of the group can reach the cut-off
                test_rows(&state[i], block, codes, terms, code_stride, start, end, least);
            }
        }
        for (size_t i = 0; i < n; i++) counts[first + i] = state[i].count;
    }
}

/// Queries across the lanes: at most LANE_QUERIES_MAX_DWORDS four-byte groups per row (dimension 1024).
#define LANE_QUERIES_MAX_DWORDS 256

/// Four code bytes as one 32-bit lane value (memcpy: no aliasing assumption; compiles to a load).
static inline int32_t four_bytes(const int8_t *bytes) {
    int32_t value;
    memcpy(&value, bytes, 4);
    return value;
}

/// The queries-across-the-lanes kernel, generated for two register widths: 512 bits (sixteen queries,
/// `__mmask16`) and 256 bits (eight, `__mmask8`). The code is the same; only the vector type and the
/// intrinsics' names differ (`_mm512_…` / `_mm256_…`, pasted from W). Eight lanes serve a remainder of
/// at most eight queries: `vpdpbusd` on 256 bits issues twice as often as on 512 on the CPUs that have
/// both, so eight queries in eight lanes go as fast per product as sixteen in sixteen, where in
/// sixteen lanes half would idle.
///
/// lane_survivorsW: one row's biased dot products (`acc`), one per lane: the exact integers, the
/// integer test against each lane's least B of the row's group, and the bound for the lanes that pass.
///
/// block_by_lanesW: the block for up to LANES queries at once, one query per lane. Their biased codes
/// are laid out once per block so that vector k holds the four bytes k of every query; a row's four
/// bytes k are then broadcast to all lanes, and code_stride / 4 vpdpbusd give the row's biased dot
/// product with every query, with no horizontal sums (which cost more than the products in
/// block_by_query). The same exact integers, so the same test, bound and survivors (ascending) as
/// block_by_query. Eight rows at a time: eight independent accumulations keep vpdpbusd busy (one
/// chain per row would wait on its latency), and each vector of query bytes is loaded once for the
/// eight.
#define LANE_KERNELS(W, LANES, MASK)                                                                                                         \
    AVX512 static inline void lane_survivors##W(const rk_query *queries, const double *dot_cutoffs, const rk_block *block,               \
                                                const rk_row_terms *terms, MASK active, const __m##W##i *least, size_t r, __m##W##i acc, \
                                                uint32_t *survivors, size_t *count) {                                                    \
        __m##W##i exact = _mm##W##_sub_epi32(acc, _mm##W##_set1_epi32(block->code_sum[r] * 128));                                        \
        MASK passing = _mm##W##_mask_cmpge_epi32_mask(active, exact, least[r / RK_BLOCK]);                                               \
        if (passing == 0) return;                                                                                                        \
        int32_t dots[LANES];                                                                                                             \
        _mm##W##_storeu_si##W((void *)dots, exact);                                                                                      \
        /* An INT32_MIN threshold stands for "every B": the bound decides, as in block_by_query. */                                      \
        for (unsigned pass = passing; pass != 0; pass &= pass - 1) {                                                                     \
            unsigned j = (unsigned)__builtin_ctz(pass);                                                                                  \
            if (rk_bound(&queries[j], terms + r, dots[j]) >= dot_cutoffs[j]) survivors[j * RK_BLOCK_ROWS + count[j]++] = (uint32_t)r;    \
        }                                                                                                                                \
    }                                                                                                                                    \
                                                                                                                                         \
    AVX512 static void block_by_lanes##W(const rk_query *queries, size_t n, const double *dot_cutoffs, const rk_block *block,            \
                                         const int8_t *codes, const rk_row_terms *terms, size_t code_stride, uint32_t *survivors,        \
                                         size_t *counts) {                                                                               \
        const size_t dwords = code_stride / 4;                                                                                           \
        __m##W##i lanes[LANE_QUERIES_MAX_DWORDS];                                                                                        \
        for (size_t k = 0; k < dwords; k++) {                                                                                            \
            int32_t column[LANES];                                                                                                       \
            for (size_t j = 0; j < LANES; j++) {                                                                                         \
                /* Unused lanes: a biased zero query (every byte 128); their results are masked off. */                                  \
                int32_t value = (int32_t)0x80808080u;                                                                                    \
                if (j < n) memcpy(&value, queries[j].biased + 4 * k, 4);                                                                 \
                column[j] = value;                                                                                                       \
            }                                                                                                                            \
            lanes[k] = _mm##W##_loadu_si##W((const void *)column);                                                                       \
        }                                                                                                                                \
        const MASK active = (MASK)((1u << n) - 1);                                                                                       \
        /* Per group, each lane's least B as the integer test's threshold (INT32_MAX: no row can pass). */                               \
        __m##W##i least[RK_BLOCK_ROWS / RK_BLOCK];                                                                                       \
        for (size_t start = 0, group = 0; start < block->rows; start += RK_BLOCK, group++) {                                             \
            int32_t column[LANES];                                                                                                       \
            for (size_t j = 0; j < LANES; j++) {                                                                                         \
                int64_t value = j < n ? rk_least_dot(&queries[j], block->largest[group], dot_cutoffs[j]) : INT64_MAX;                    \
                column[j] = value < INT32_MIN ? INT32_MIN : value > INT32_MAX ? INT32_MAX : (int32_t)value;                              \
            }                                                                                                                            \
            least[group] = _mm##W##_loadu_si##W((const void *)column);                                                                   \
        }                                                                                                                                \
        size_t count[LANES] = {0};                                                                                                       \
        size_t r = 0;                                                                                                                    \
        for (; r + 8 <= block->rows; r += 8) {                                                                                           \
            __m##W##i acc[8];                                                                                                            \
            for (int i = 0; i < 8; i++) acc[i] = _mm##W##_setzero_si##W();                                                              \
            for (size_t k = 0; k < dwords; k++) {                                                                                        \
                const __m##W##i q = lanes[k];                                                                                            \
                for (int i = 0; i < 8; i++) {                                                                                            \
                    acc[i] = _mm##W##_dpbusd_epi32(acc[i], q, _mm##W##_set1_epi32(four_bytes(codes + (r + i) * code_stride + 4 * k)));   \
                }                                                                                                                        \
            }                                                                                                                            \
            for (int i = 0; i < 8; i++) {                                                                                                \
                lane_survivors##W(queries, dot_cutoffs, block, terms, active, least, r + i, acc[i], survivors, count);                   \
            }                                                                                                                            \
        }                                                                                                                                \
        for (; r < block->rows; r++) {                                                                                                   \
            __m##W##i acc = _mm##W##_setzero_si##W();                                                                                    \
            for (size_t k = 0; k < dwords; k++) {                                                                                        \
                acc = _mm##W##_dpbusd_epi32(acc, lanes[k], _mm##W##_set1_epi32(four_bytes(codes + r * code_stride + 4 * k)));            \
            }                                                                                                                            \
            lane_survivors##W(queries, dot_cutoffs, block, terms, active, least, r, acc, survivors, count);                              \
        }                                                                                                                                \
        for (size_t j = 0; j < n; j++) counts[j] = count[j];                                                                             \
    }

LANE_KERNELS(512, 16, __mmask16)
LANE_KERNELS(256, 8, __mmask8)

/// Fewest queries left over from the groups of sixteen that go through the eight-lane kernel rather
/// than query by query, and the longest rows it takes (in code bytes). Measured with a C harness over
/// 200,000 rows (docs/scans.md): at 128 and 256 bytes eight lanes beat query by query from three
/// queries on (at 128 bytes and eight queries, 118 G products a second against 80 G for eight of
/// sixteen lanes); at 512 bytes they lose to it (45 against 58 G at eight queries), as each product
/// needs its row bytes from L2 twice as often as in sixteen lanes.
#define RK_LANES8_MINIMUM 3
#define RK_LANES8_LONGEST_ROW 256

/// rk_prefilter_block at the AVX-512 VNNI level: sixteen queries at a time across the lanes, a
/// remainder of nine to fifteen as one more group of sixteen lanes (as many idle lanes as two groups
/// of eight would leave), a smaller one in eight lanes where they pay (short rows, three queries or
/// more; for long rows a remainder of eight still takes sixteen lanes), and the rest, with what the
/// lanes cannot take (rows longer than LANE_QUERIES_MAX_DWORDS four-byte groups), query by query.
AVX512 void rk_prefilter_block_avx512_vnni(const rk_query *queries, size_t query_count, const double *dot_cutoffs, const rk_block *block,
                                           const int8_t *codes, const rk_row_terms *terms, size_t code_stride, uint32_t *survivors,
                                           size_t *counts) {
    size_t first = 0;
    if (code_stride / 4 <= LANE_QUERIES_MAX_DWORDS) {
        const int short_rows = code_stride <= RK_LANES8_LONGEST_ROW;
        while (first < query_count) {
            size_t left = query_count - first;
            size_t n = left < 16 ? left : 16;
            if (n > 8 || (n == 8 && !short_rows)) {
                block_by_lanes512(queries + first, n, dot_cutoffs + first, block, codes, terms, code_stride, survivors + first * RK_BLOCK_ROWS,
                                  counts + first);
            } else if (short_rows && n >= RK_LANES8_MINIMUM) {
                block_by_lanes256(queries + first, n, dot_cutoffs + first, block, codes, terms, code_stride, survivors + first * RK_BLOCK_ROWS,
                                  counts + first);
            } else {
                break;
            }
            first += n;
        }
    }
    if (first < query_count) {
        block_by_query(queries + first, query_count - first, dot_cutoffs + first, block, codes, terms, code_stride,
                       survivors + first * RK_BLOCK_ROWS, counts + first);
    }
}

AVX512 size_t rk_prefilter_avx512_vnni(const rk_query *query, const int8_t *codes, const rk_row_terms *terms, size_t code_stride,
                                       size_t rows, double dot_cutoff, uint32_t *survivors) {
    return rk_prefilter_blocks(rk_dots_avx512_vnni, query, codes, terms, code_stride, rows, dot_cutoff, survivors);
}

// The row encoder at the AVX-512 level: the same codes as rk_encode_row_scalar (float32 division,
// round to nearest even), with the norms summed in double, eight lanes at a time (a different order
// of exact-enough sums: each level's terms are bounds in their own right). Sixteen values a step,
// the last step masked.
AVX512 void rk_encode_row_avx512(const float *row, size_t dimension, size_t code_stride, int8_t *codes, rk_row_terms *terms) {
    __m512 largest = _mm512_setzero_ps();
    for (size_t i = 0; i < dimension; i += 16) {
        __mmask16 mask = dimension - i >= 16 ? 0xffff : (__mmask16)((1u << (dimension - i)) - 1);
        largest = _mm512_max_ps(largest, _mm512_abs_ps(_mm512_maskz_loadu_ps(mask, row + i)));
    }
    float scale = _mm512_reduce_max_ps(largest) / 127.0f;
    if (!(scale > 0)) {
        rk_encode_row_scalar(row, dimension, code_stride, codes, terms);
        return;
    }
    const __m512 scales = _mm512_set1_ps(scale);
    const __m512d scales_d = _mm512_set1_pd((double)scale);
    const __m512i high = _mm512_set1_epi32(127), low = _mm512_set1_epi32(-127);
    __m512d residual = _mm512_setzero_pd(), coded = residual, norm = residual;
    __m512i sum = _mm512_setzero_si512();
    for (size_t i = 0; i < dimension; i += 16) {
        __mmask16 mask = dimension - i >= 16 ? 0xffff : (__mmask16)((1u << (dimension - i)) - 1);
        __m512 x = _mm512_maskz_loadu_ps(mask, row + i);
        __m512i c = _mm512_cvtps_epi32(_mm512_div_ps(x, scales));
        c = _mm512_maskz_mov_epi32(mask, _mm512_max_epi32(_mm512_min_epi32(c, high), low));
        _mm_mask_storeu_epi8(codes + i, mask, _mm512_cvtepi32_epi8(c));
        sum = _mm512_add_epi32(sum, c);
        for (int half = 0; half < 2; half++) {
            __m512d xd = _mm512_cvtps_pd(half ? _mm512_extractf32x8_ps(x, 1) : _mm512_castps512_ps256(x));
            __m512d cd = _mm512_cvtepi32_pd(half ? _mm512_extracti64x4_epi64(c, 1) : _mm512_castsi512_si256(c));
            __m512d approximation = _mm512_mul_pd(cd, scales_d);  // exact: 24 × 8 significant bits
            __m512d difference = _mm512_sub_pd(xd, approximation);
            residual = _mm512_add_pd(residual, _mm512_mul_pd(difference, difference));
            coded = _mm512_add_pd(coded, _mm512_mul_pd(approximation, approximation));
            norm = _mm512_add_pd(norm, _mm512_mul_pd(xd, xd));
        }
    }
    for (size_t i = dimension; i < code_stride; i++) codes[i] = 0;
    rk_finish_row(dimension, _mm512_reduce_add_pd(residual), _mm512_reduce_add_pd(coded), _mm512_reduce_add_pd(norm),
                  _mm512_reduce_add_epi32(sum), scale, terms);
}

#endif
