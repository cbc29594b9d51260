// Shared between the portable file and the x86 kernels; not part of the module's interface.
#ifndef KERNELS_INTERNAL_H
#define KERNELS_INTERNAL_H

#include "scan_kernels.h"

#include <math.h>
#include <stdint.h>

/// The upper bound of the float32 kernel's dot product for one row (derivation in scan_kernels.c).
/// Always inlined, so that each kernel level compiles it with its own instruction set.
static inline __attribute__((always_inline)) double rk_bound(const rk_query *query, const rk_row_terms *terms, int32_t dot) {
    // No fused multiply-add, though the AVX-512 functions it is inlined into could use one: every
    // level then computes the same bound to the last bit, and keeps the same rows.
#pragma clang fp contract(off)
    double estimate = query->scale * (double)terms->scale * (double)dot;
    double error = query->residual * (double)terms->code_norm + query->norm * (double)terms->slack;
    return estimate + error + 1e-9 * (fabs(estimate) + error) + 1e-30;
}

/// The largest scale, code_norm and slack of `rows` rows (rk_select's S and the parts of its E).
static inline __attribute__((always_inline)) void rk_largest_terms(const rk_row_terms *terms, size_t rows, float largest[3]) {
    float largest_scale = 0, largest_norm = 0, largest_slack = 0;
    for (size_t r = 0; r < rows; r++) {
        largest_scale = terms[r].scale > largest_scale ? terms[r].scale : largest_scale;
        largest_norm = terms[r].code_norm > largest_norm ? terms[r].code_norm : largest_norm;
        largest_slack = terms[r].slack > largest_slack ? terms[r].slack : largest_slack;
    }
    largest[0] = largest_scale;
    largest[1] = largest_norm;
    largest[2] = largest_slack;
}

/// The least integer B a row of a group with these largest terms (scale, code_norm, slack) needs
/// for its bound to reach the cut-off (see rk_select).
static inline __attribute__((always_inline)) int64_t rk_least_dot(const rk_query *query, const float largest[3], double dot_cutoff) {
#pragma clang fp contract(off)
    double error = (query->residual * (double)largest[1] + query->norm * (double)largest[2]) * (1 + 1e-6) + 1e-29;
    double room = dot_cutoff - error;  // what t·S·B must reach (−∞ and +∞ cut-offs stay infinite)
    double step = query->scale * (double)largest[0] * (1 + 1e-6);
    if (!(room > 0)) return INT64_MIN;  // even B ≤ 0 may reach it (or the cut-off is −∞): every row gets its bound
    if (!(step > 0) || room / step > 4e9) return INT64_MAX;  // no integer B can reach it
    return (int64_t)ceil(room / step);
}

/// Appends to `survivors` the rows of a block whose bound reaches the cut-off (ascending); returns
/// how many. Two levels: with the block's largest scale S and largest error term E (over its rows),
/// every row's bound is at most t·S·max(B, 0) + E (with margins far above the rounding of either
/// computation), so a row whose integer B is below K = (cut-off − E) / (t·S) cannot reach the
/// cut-off: one integer comparison rejects almost every row, and only the rest get their own bound.
/// The rows kept are exactly those whose rk_bound reaches the cut-off.
static inline __attribute__((always_inline)) size_t rk_select(const rk_query *query, const rk_row_terms *terms, const int32_t *dots,
                                                              size_t rows, double dot_cutoff, uint32_t first, uint32_t *survivors) {
#pragma clang fp contract(off)
    float largest[3];
    rk_largest_terms(terms, rows, largest);
    int64_t least = rk_least_dot(query, largest, dot_cutoff);  // rows with B < least cannot reach the cut-off
    size_t count = 0;
    for (size_t r = 0; r < rows; r++) {
        if ((int64_t)dots[r] >= least && rk_bound(query, terms + r, dots[r]) >= dot_cutoff) survivors[count++] = first + (uint32_t)r;
    }
    return count;
}

/// A level's integer kernel: the exact b·c for `rows` consecutive rows.
typedef void (*rk_dots_kernel)(const rk_query *query, const int8_t *codes, const rk_row_terms *terms, size_t code_stride, size_t rows,
                               int32_t *dots);

/// The prefilter over `rows` rows, block by block: a level's integer kernel, then the selection.
/// Always inlined into each level's function with that level's kernel, so the selection compiles
/// with the level's instruction set and the kernel is called directly.
static inline __attribute__((always_inline)) size_t rk_prefilter_blocks(rk_dots_kernel kernel, const rk_query *query, const int8_t *codes,
                                                                        const rk_row_terms *terms, size_t code_stride, size_t rows,
                                                                        double dot_cutoff, uint32_t *survivors) {
    int32_t dots[RK_BLOCK];
    size_t count = 0;
    for (size_t start = 0; start < rows; start += RK_BLOCK) {
        size_t n = rows - start < RK_BLOCK ? rows - start : RK_BLOCK;
        kernel(query, codes + start * code_stride, terms + start, code_stride, n, dots);
        count += rk_select(query, terms + start, dots, n, dot_cutoff, (uint32_t)start, survivors + count);
    }
    return count;
}

#if defined(__x86_64__)
int rk_avx2_block_is_coarse(size_t query_count, size_t code_stride);
void rk_coarse_dots_avx2(const rk_query *queries, size_t query_count, const int8_t *codes, size_t code_stride, size_t rows,
                         int32_t *dots);
void rk_prefilter_block_avx2(const rk_query *queries, size_t query_count, const double *dot_cutoffs, const rk_block *block,
                             const int8_t *codes, const rk_row_terms *terms, size_t code_stride, uint32_t *survivors, size_t *counts);
void rk_prefilter_block_avx512_vnni(const rk_query *queries, size_t query_count, const double *dot_cutoffs, const rk_block *block,
                                    const int8_t *codes, const rk_row_terms *terms, size_t code_stride, uint32_t *survivors, size_t *counts);
#endif
void rk_finish_row(size_t dimension, double residual, double coded, double norm, int32_t sum, float scale, rk_row_terms *terms);
void rk_encode_row_scalar(const float *row, size_t dimension, size_t code_stride, int8_t *codes, rk_row_terms *terms);
void rk_dots_scalar(const rk_query *query, const int8_t *codes, const rk_row_terms *terms, size_t code_stride, size_t rows,
                    int32_t *dots);
size_t rk_prefilter_scalar(const rk_query *query, const int8_t *codes, const rk_row_terms *terms, size_t code_stride, size_t rows,
                           double dot_cutoff, uint32_t *survivors);

void rk_landmark_moments_scalar(const double *lanes, const float *rows, size_t row_stride, size_t count, double *moments);

#if defined(__x86_64__)
void rk_landmark_moments_avx2(const double *lanes, const float *rows, size_t row_stride, size_t count, double *moments);
int rk_x86_supported_level(void);
void rk_encode_row_avx512(const float *row, size_t dimension, size_t code_stride, int8_t *codes, rk_row_terms *terms);
void rk_dots_avx2(const rk_query *query, const int8_t *codes, const rk_row_terms *terms, size_t code_stride, size_t rows,
                  int32_t *dots);
size_t rk_prefilter_avx2(const rk_query *query, const int8_t *codes, const rk_row_terms *terms, size_t code_stride, size_t rows,
                         double dot_cutoff, uint32_t *survivors);
void rk_dots_avx512_vnni(const rk_query *query, const int8_t *codes, const rk_row_terms *terms, size_t code_stride, size_t rows,
                         int32_t *dots);
size_t rk_prefilter_avx512_vnni(const rk_query *query, const int8_t *codes, const rk_row_terms *terms, size_t code_stride,
                                size_t rows, double dot_cutoff, uint32_t *survivors);
#endif

#endif
