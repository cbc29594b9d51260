// Int8 codes, the prefilter's bound, and the choice of kernel level. The x86 kernels are in
// kernels_x86.c; this file is portable C (it also builds on aarch64, where only the scalar level
// exists).
#include "scan_kernels.h"
#include "kernels_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

size_t rk_code_stride(size_t dimension) { return (dimension + 63) / 64 * 64; }

// ---------------------------------------------------------------------------------------------
// The bound.
//
// Reals first. Let x be a row, s its scale and c its codes, r = x − s·c; q a query, t its scale
// and b its codes. Then, exactly,
//
//     q·x = q·(s·c) + q·r = s·t·(b·c) + s·(q − t·b)·c + q·r
//
// and by Cauchy–Schwarz |s·(q − t·b)·c| ≤ ‖q − t·b‖·‖s·c‖ and |q·r| ≤ ‖q‖·‖r‖, so
//
//     q·x ≤ s·t·B + ‖q − t·b‖·‖s·c‖ + ‖q‖·‖r‖,        B = b·c, an exact integer.
//
// The float32 kernel does not return q·x but its rounded sum. Each of its lanes multiplies and
// adds (no fused multiply-add), then the lanes are added and the tail; the longest chain of
// roundings any product goes through is at most n = d/8 + 1 + 7 + 7 ≤ d + 16 operations, so
// (Higham, Accuracy and Stability of Numerical Algorithms, §3.1)
//
//     |kernel(q, x) − q·x| ≤ γₙ·Σ|qᵢ·xᵢ| ≤ γₙ·‖q‖·‖x‖,     γₙ = n·u / (1 − n·u),  u = 2⁻²⁴,
//
// plus, for products that underflow, at most d·2⁻¹⁴⁹ absolute. Hence
//
//     kernel(q, x) ≤ s·t·B + ‖q − t·b‖·‖s·c‖ + ‖q‖·(‖r‖ + γₙ·‖x‖) + d·2⁻¹⁴⁹.
//
// Stored per row: s (exactly the float the codes were made with), code_norm ≥ ‖s·c‖ and
// slack ≥ ‖r‖ + γₙ·‖x‖, both computed in double and rounded up to float; per query: t, residual
// ≥ ‖q − t·b‖ and norm ≥ ‖q‖, in double, inflated. The norms are sums of non-negative terms in
// double, whose relative error is at most (d + 2)·2⁻⁵³ < 10⁻¹² for d ≤ 8192; the inflation by
// 10⁻⁹ covers it. The prefilter evaluates the right-hand side in double (a few operations, each
// with relative error 2⁻⁵³) and adds 10⁻⁹ of the magnitudes of its terms and 10⁻³⁰ absolute
// (far above d·2⁻¹⁴⁹ ≈ 10⁻⁴¹): the result is an upper bound of what the kernel can return.
// A row is skipped only when that bound is below the cut-off, so every row the float32 kernel
// would score at or above the cut-off is scored by it.
// ---------------------------------------------------------------------------------------------

static const double inflation = 1.0 + 1e-9;

/// The float32 kernel's relative error bound γₙ for rows of `dimension` floats (see above).
static double kernel_gamma(size_t dimension) {
    double nu = (double)(dimension + 16) * 0x1p-24;
    return nu / (1.0 - nu);
}

/// The smallest float not below `value` (value ≥ 0).
static float round_up(double value) {
    float f = (float)value;
    if ((double)f < value) f = nextafterf(f, INFINITY);
    return f;
}

/// The code of one value: round-to-nearest-even of value / scale in float32, clamped to ±limit (127
/// for rows; the AVX-512 encoder computes the same with vdivps and vcvtps2dq, so every level makes
/// the same codes).
static int8_t quantise(float value, float scale, float limit) {
    float code = nearbyintf(value / scale);
    if (code > limit) code = limit;
    if (code < -limit) code = -limit;
    return (int8_t)code;
}

/// Codes of a query within ±limit, scaled by its largest magnitude; returns the scale and writes
/// Σ (q − scale · code)² and Σ code.
static float quantise_query(const float *query, size_t dimension, float limit, int8_t *codes, double *residual, int32_t *sum) {
    float largest = 0;
    for (size_t i = 0; i < dimension; i++) largest = fmaxf(largest, fabsf(query[i]));
    float scale = largest / limit;
    *residual = 0;
    *sum = 0;
    for (size_t i = 0; i < dimension; i++) {
        int8_t code = scale > 0 ? quantise(query[i], scale, limit) : 0;
        codes[i] = code;
        *sum += code;
        double difference = (double)query[i] - (double)scale * code;
        *residual += difference * difference;
    }
    return scale;
}

/// Turns a row's sums into its terms (see the derivation above).
void rk_finish_row(size_t dimension, double residual, double coded, double norm, int32_t sum, float scale, rk_row_terms *terms) {
    terms->scale = scale;
    terms->code_norm = round_up(sqrt(coded) * inflation);
    terms->slack = round_up((sqrt(residual) + kernel_gamma(dimension) * sqrt(norm) * inflation) * inflation);
    terms->code_sum = sum;
}

void rk_encode_row_scalar(const float *row, size_t dimension, size_t code_stride, int8_t *codes, rk_row_terms *terms) {
    float largest = 0;
    for (size_t i = 0; i < dimension; i++) largest = fmaxf(largest, fabsf(row[i]));
    float scale = largest / 127.0f;
    double residual = 0, coded = 0, norm = 0;
    int32_t sum = 0;
    for (size_t i = 0; i < dimension; i++) {
        int8_t code = scale > 0 ? quantise(row[i], scale, 127) : 0;
        codes[i] = code;
        sum += code;
        double approximation = (double)scale * code;  // exact: 24 × 8 significant bits
        double difference = (double)row[i] - approximation;
        residual += difference * difference;
        coded += approximation * approximation;
        norm += (double)row[i] * row[i];
    }
    memset(codes + dimension, 0, code_stride - dimension);
    rk_finish_row(dimension, residual, coded, norm, sum, scale, terms);
}

void rk_encode_row(const float *row, size_t dimension, size_t code_stride, int8_t *codes, rk_row_terms *terms) {
    rk_encode_row_at_level(rk_active_level(), row, dimension, code_stride, codes, terms);
}

void rk_encode_row_at_level(int level, const float *row, size_t dimension, size_t code_stride, int8_t *codes, rk_row_terms *terms) {
#if defined(__x86_64__)
    if (level == RK_LEVEL_AVX512_VNNI) {
        rk_encode_row_avx512(row, dimension, code_stride, codes, terms);
        return;
    }
#endif
    rk_encode_row_scalar(row, dimension, code_stride, codes, terms);
}

void rk_encode_query(const float *query, size_t dimension, size_t code_stride, rk_query *encoded) {
    double residual, coarse_residual, norm = 0;
    int32_t sum;
    float scale = quantise_query(query, dimension, 127, encoded->codes, &residual, &sum);
    float coarse_scale = quantise_query(query, dimension, 15, encoded->coarse, &coarse_residual, &encoded->coarse_sum);
    for (size_t i = 0; i < dimension; i++) norm += (double)query[i] * query[i];
    memset(encoded->codes + dimension, 0, code_stride - dimension);
    memset(encoded->coarse + dimension, 0, code_stride - dimension);
    for (size_t i = 0; i < code_stride; i++) encoded->biased[i] = (uint8_t)(encoded->codes[i] + 128);
    encoded->scale = scale;
    encoded->residual = sqrt(residual) * inflation;
    encoded->norm = sqrt(norm) * inflation;
    encoded->coarse_scale = coarse_scale;
    encoded->coarse_residual = sqrt(coarse_residual) * inflation;
}

double rk_upper_bound(const rk_query *query, const rk_row_terms *terms, int32_t dot) {
    return rk_bound(query, terms, dot);
}

static int higher_bound_first(const void *a, const void *b) {
    double x = ((const rk_ranked *)a)->bound, y = ((const rk_ranked *)b)->bound;
    return (x < y) - (x > y);
}

void rk_rank_survivors(int level, const rk_query *query, const int8_t *codes, const rk_row_terms *terms, size_t code_stride,
                       const uint32_t *rows, size_t count, rk_ranked *ranked) {
    for (size_t i = 0; i < count; i++) {
        int32_t dot;
        rk_int8_dots(level, query, codes + (size_t)rows[i] * code_stride, terms + rows[i], code_stride, 1, &dot);
        ranked[i].bound = rk_bound(query, terms + rows[i], dot);
        ranked[i].row = rows[i];
    }
    qsort(ranked, count, sizeof *ranked, higher_bound_first);
}

// ---------------------------------------------------------------------------------------------
// Scalar level: the reference every other level is tested against.
// ---------------------------------------------------------------------------------------------

void rk_dots_scalar(const rk_query *query, const int8_t *codes, const rk_row_terms *terms, size_t code_stride, size_t rows,
                    int32_t *dots) {
    (void)terms;
    for (size_t r = 0; r < rows; r++) {
        const int8_t *row = codes + r * code_stride;
        int32_t sum = 0;
        for (size_t i = 0; i < code_stride; i++) sum += (int32_t)query->codes[i] * row[i];
        dots[r] = sum;
    }
}

size_t rk_prefilter_scalar(const rk_query *query, const int8_t *codes, const rk_row_terms *terms, size_t code_stride, size_t rows,
                           double dot_cutoff, uint32_t *survivors) {
    return rk_prefilter_blocks(rk_dots_scalar, query, codes, terms, code_stride, rows, dot_cutoff, survivors);
}

// ---------------------------------------------------------------------------------------------
// Dispatch.
// ---------------------------------------------------------------------------------------------

static int active_level = -1;

int rk_supported_level(void) {
#if defined(__x86_64__)
    return rk_x86_supported_level();
#else
    return RK_LEVEL_SCALAR;
#endif
}

const char *rk_level_name(int level) {
    switch (level) {
    case RK_LEVEL_SCALAR: return "scalar";
    case RK_LEVEL_AVX2: return "avx2";
    case RK_LEVEL_AVX512_VNNI: return "avx512-vnni";
    default: return NULL;
    }
}

int rk_active_level(void) {
    // Racing first calls compute the same value; an int store is atomic on every target we build.
    int level = __atomic_load_n(&active_level, __ATOMIC_RELAXED);
    if (level >= 0) return level;
    level = rk_supported_level();
    const char *forced = getenv("REGISTRY_KERNELS");
    if (forced != NULL) {
        for (int candidate = RK_LEVEL_SCALAR; candidate <= RK_LEVEL_AVX512_VNNI; candidate++) {
            if (strcmp(forced, rk_level_name(candidate)) == 0 && candidate < level) level = candidate;
        }
    }
    __atomic_store_n(&active_level, level, __ATOMIC_RELAXED);
    return level;
}

void rk_int8_dots(int level, const rk_query *query, const int8_t *codes, const rk_row_terms *terms, size_t code_stride, size_t rows,
                  int32_t *dots) {
    switch (level) {
#if defined(__x86_64__)
    case RK_LEVEL_AVX512_VNNI: rk_dots_avx512_vnni(query, codes, terms, code_stride, rows, dots); return;
    case RK_LEVEL_AVX2: rk_dots_avx2(query, codes, terms, code_stride, rows, dots); return;
#endif
    default: rk_dots_scalar(query, codes, terms, code_stride, rows, dots); return;
    }
}

size_t rk_prefilter(int level, const rk_query *query, const int8_t *codes, const rk_row_terms *terms, size_t code_stride, size_t rows,
                    double dot_cutoff, uint32_t *survivors) {
    switch (level) {
#if defined(__x86_64__)
    case RK_LEVEL_AVX512_VNNI:
        return rk_prefilter_avx512_vnni(query, codes, terms, code_stride, rows, dot_cutoff, survivors);
    case RK_LEVEL_AVX2: return rk_prefilter_avx2(query, codes, terms, code_stride, rows, dot_cutoff, survivors);
#endif
    default: return rk_prefilter_scalar(query, codes, terms, code_stride, rows, dot_cutoff, survivors);
    }
}

void rk_prepare_block(const rk_row_terms *terms, size_t rows, rk_block *block) {
    block->rows = rows;
    for (size_t r = 0; r < rows; r++) block->code_sum[r] = terms[r].code_sum;
    for (size_t start = 0, group = 0; start < rows; start += RK_BLOCK, group++) {
        rk_largest_terms(terms + start, rows - start < RK_BLOCK ? rows - start : RK_BLOCK, block->largest[group]);
    }
}

void rk_prefilter_block(int level, const rk_query *queries, size_t query_count, const double *dot_cutoffs, const rk_block *block,
                        const int8_t *codes, const rk_row_terms *terms, size_t code_stride, uint32_t *survivors, size_t *counts) {
#if defined(__x86_64__)
    if (level == RK_LEVEL_AVX512_VNNI) {
        rk_prefilter_block_avx512_vnni(queries, query_count, dot_cutoffs, block, codes, terms, code_stride, survivors, counts);
        return;
    }
    if (level == RK_LEVEL_AVX2) {
        rk_prefilter_block_avx2(queries, query_count, dot_cutoffs, block, codes, terms, code_stride, survivors, counts);
        return;
    }
#endif
    for (size_t q = 0; q < query_count; q++) {
        counts[q] = rk_prefilter(level, &queries[q], codes, terms, code_stride, block->rows, dot_cutoffs[q], survivors + q * RK_BLOCK_ROWS);
    }
}

int rk_prefilter_block_is_coarse(int level, size_t query_count, size_t code_stride) {
#if defined(__x86_64__)
    return level == RK_LEVEL_AVX2 && rk_avx2_block_is_coarse(query_count, code_stride);
#else
    (void)level;
    (void)query_count;
    (void)code_stride;
    return 0;
#endif
}

void rk_coarse_dots(int level, const rk_query *queries, size_t query_count, const int8_t *codes, size_t code_stride, size_t rows,
                    int32_t *dots) {
#if defined(__x86_64__)
    if (level >= RK_LEVEL_AVX2) {
        rk_coarse_dots_avx2(queries, query_count, codes, code_stride, rows, dots);
        return;
    }
#endif
    (void)level;
    for (size_t q = 0; q < query_count; q++) {
        rk_query coarse = queries[q];
        coarse.codes = queries[q].coarse;
        rk_dots_scalar(&coarse, codes, NULL, code_stride, rows, dots + q * rows);
    }
}

// ---------------------------------------------------------------------------------------------
// Landmark moments (the aligned landmark algorithm, version 1001): the scalar reference. One
// accumulator per (moment, axis), products added slot by slot: the AVX2 kernel's lanes do exactly
// these operations in this order, and so does the Swift reference in RegistryModel.
// ---------------------------------------------------------------------------------------------

#pragma clang fp contract(off)
void rk_landmark_moments_scalar(const double *lanes, const float *rows, size_t row_stride, size_t count, double *moments) {
    for (size_t r = 0; r < count; r++) {
        const float *row = rows + r * row_stride;
        double m[RK_LANDMARK_MOMENTS] = {0};
        for (int slot = 0; slot < 32; slot++) {
            const double *l = lanes + 4 * slot;
            for (int axis = 0; axis < 3; axis++) {
                double b = (double)row[3 * slot + axis];
                double weighted = l[3] * b;
                m[axis] += l[0] * b;
                m[4 + axis] += l[1] * b;
                m[8 + axis] += l[2] * b;
                m[12 + axis] += weighted;
                m[16 + axis] += weighted * b;
            }
        }
        for (int i = 0; i < RK_LANDMARK_MOMENTS; i++) moments[r * RK_LANDMARK_MOMENTS + i] = m[i];
    }
}

void rk_landmark_moments(int level, const double *lanes, const float *rows, size_t row_stride, size_t count, double *moments) {
#if defined(__x86_64__)
    if (level >= RK_LEVEL_AVX2) {
        rk_landmark_moments_avx2(lanes, rows, row_stride, count, moments);
        return;
    }
#endif
    (void)level;
    rk_landmark_moments_scalar(lanes, rows, row_stride, count, moments);
}
