// Int8 codes of float32 rows and the kernels that scan them, chosen at run time for the CPU.
//
// A row x of `dimension` floats is kept beside its float32 copy as int8 codes c (padded with zeros
// to `code_stride` bytes, a multiple of 64) and a scale s, so that x ≈ s·c. A query q gets the same
// treatment (t, b). The prefilter computes the exact integer B = b·c for every row, and from it and
// the per-row terms an upper bound of what the float32 kernel can return for q·x; a row whose bound
// is below the cut-off cannot enter a result and is skipped. The derivation of the bound is in
// scan_kernels.c, above rk_encode_row.
//
// Kernel levels: the integer dot products are exact at every level, so every level returns the same
// survivors; only speed differs. The level is chosen once, from cpuid and the OS's saved register
// state, and can be lowered (never raised) with the environment variable REGISTRY_KERNELS
// (scalar, avx2 or avx512-vnni).
#ifndef SCAN_KERNELS_H
#define SCAN_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum {
    RK_LEVEL_SCALAR = 0,
    RK_LEVEL_AVX2 = 1,
    RK_LEVEL_AVX512_VNNI = 2,
};

/// Bytes of codes per row for a dimension: rounded up to a multiple of 64.
size_t rk_code_stride(size_t dimension);

/// The highest level this CPU and OS support.
int rk_supported_level(void);
/// The level in use: the supported one, lowered by REGISTRY_KERNELS when set. Chosen on first call.
int rk_active_level(void);
/// "scalar", "avx2", "avx512-vnni"; NULL for an unknown level.
const char *rk_level_name(int level);

/// What the bound needs to know of a row besides its codes. 16 bytes.
typedef struct {
    /// x ≈ scale · codes (a float32, used exactly as stored).
    float scale;
    /// An upper bound of ‖scale · codes‖₂.
    float code_norm;
    /// An upper bound of ‖x − scale · codes‖₂ + γ·‖x‖₂, γ the float32 kernel's relative error
    /// bound for this dimension (see scan_kernels.c).
    float slack;
    /// Σ codes (the AVX-512 kernel biases the query to unsigned bytes and takes 128·Σ back off).
    int32_t code_sum;
} rk_row_terms;

/// A quantised query. `codes` and `biased` point to `code_stride` bytes each, owned by the caller.
typedef struct {
    int8_t *codes;
    /// codes + 128 as unsigned bytes (the AVX-512 VNNI kernel's operand).
    uint8_t *biased;
    /// q ≈ scale · codes.
    double scale;
    /// An upper bound of ‖q − scale · codes‖₂.
    double residual;
    /// An upper bound of ‖q‖₂.
    double norm;
    /// The same query in five-bit codes (|code| ≤ 15; `code_stride` bytes, owned by the caller), for
    /// the AVX2 batched check's first test: q ≈ coarse_scale · coarse.
    int8_t *coarse;
    double coarse_scale;
    /// An upper bound of ‖q − coarse_scale · coarse‖₂.
    double coarse_residual;
    /// Σ coarse.
    int32_t coarse_sum;
} rk_query;

/// Encodes one row of `dimension` finite floats into `codes` (`code_stride` bytes) and its terms.
void rk_encode_row(const float *row, size_t dimension, size_t code_stride, int8_t *codes, rk_row_terms *terms);

/// rk_encode_row at a given (supported) level; every level makes the same codes.
void rk_encode_row_at_level(int level, const float *row, size_t dimension, size_t code_stride, int8_t *codes, rk_row_terms *terms);

/// Encodes a query; `query->codes`, `query->biased` and `query->coarse` must point to `code_stride`
/// bytes each.
void rk_encode_query(const float *query, size_t dimension, size_t code_stride, rk_query *encoded);

/// The exact integer dot products b·c of the query's codes with `rows` consecutive rows of codes,
/// at `level` (which must be supported). For tests and the scalar reference.
void rk_int8_dots(int level, const rk_query *query, const int8_t *codes, const rk_row_terms *terms, size_t code_stride,
                  size_t rows, int32_t *dots);

/// The prefilter over `rows` consecutive rows at `level`: writes to `survivors` (ascending) the
/// index of every row whose upper bound of the float32 kernel's dot product with the query is at
/// least `dot_cutoff`, and returns how many. Every row whose float32 dot product reaches
/// `dot_cutoff` is among them.
size_t rk_prefilter(int level, const rk_query *query, const int8_t *codes, const rk_row_terms *terms, size_t code_stride,
                    size_t rows, double dot_cutoff, uint32_t *survivors);

/// Rows the prefilter takes together: their integer dot products stay in L1 between its two
/// passes, and its integer test uses their largest terms.
#define RK_BLOCK 256
/// Rows of a prepared block (rk_prepare_block).
#define RK_BLOCK_ROWS 512

/// What every query passing over a block of rows shares (the batched registration check): the rows'
/// code sums side by side, and per RK_BLOCK rows the largest scale, code_norm and slack, which
/// rk_prefilter would otherwise gather again for each query.
typedef struct {
    size_t rows;
    int32_t code_sum[RK_BLOCK_ROWS];
    float largest[RK_BLOCK_ROWS / RK_BLOCK][3];
} rk_block;

/// Fills `block` from the terms of `rows` (at most RK_BLOCK_ROWS) consecutive rows.
void rk_prepare_block(const rk_row_terms *terms, size_t rows, rk_block *block);

/// rk_prefilter over the rows of a prepared block for each of `query_count` queries, query q
/// with cut-off dot_cutoffs[q], its survivors written to survivors + q·RK_BLOCK_ROWS and their number
/// to counts[q]: the same survivors (the same integer test and bound, with the block's largest terms),
/// by kernels that pass every query over a part of the block while it is in cache — except where
/// rk_prefilter_block_is_coarse says otherwise: there a row must first pass the same test and bound
/// computed from the query's five-bit codes, so the survivors are those of rk_prefilter whose
/// coarse bound also reaches the cut-off (fewer or the same; every row the float32 kernel scores at
/// or above the cut-off is still among them, both bounds being upper bounds of it).
void rk_prefilter_block(int level, const rk_query *queries, size_t query_count, const double *dot_cutoffs, const rk_block *block,
                        const int8_t *codes, const rk_row_terms *terms, size_t code_stride, uint32_t *survivors, size_t *counts);

/// Whether rk_prefilter_block at `level` with this many queries and this code stride tests the
/// coarse codes first (AVX2, two queries or more and at least one per 128 bytes of code_stride,
/// code_stride at most 2,048).
int rk_prefilter_block_is_coarse(int level, size_t query_count, size_t code_stride);

/// The integers of the coarse test, as the AVX2 batched check computes them (at `level` AVX2 and
/// above; the scalar level computes them plainly): dots[q · rows + r] = Σ b·c of query q's five-bit
/// codes b and row r's codes c, for `query_count` queries and `rows` rows (code_stride at most 2,048).
/// For tests, against rk_int8_dots with the coarse codes.
void rk_coarse_dots(int level, const rk_query *queries, size_t query_count, const int8_t *codes, size_t code_stride, size_t rows,
                    int32_t *dots);

/// The upper bound the prefilter uses for one row, given its exact integer dot product.
double rk_upper_bound(const rk_query *query, const rk_row_terms *terms, int32_t dot);

/// A survivor and its bound.
typedef struct {
    double bound;
    uint32_t row;
} rk_ranked;

/// The `count` rows given by offset from `codes` and `terms` (`rows`), each with the upper bound the
/// prefilter uses (from its exact integer dot product at `level`), written to `ranked` highest bound
/// first: a scan with many survivors rescores them in that order and stops at the first below its
/// cut-off.
void rk_rank_survivors(int level, const rk_query *query, const int8_t *codes, const rk_row_terms *terms, size_t code_stride,
                       const uint32_t *rows, size_t count, rk_ranked *ranked);

/// Whether the CPU has the SSE4.2 crc32 instruction (CRC-32C).
/// Doubles per row written by rk_landmark_moments: five groups of four lanes (x, y, z, unused).
#define RK_LANDMARK_MOMENTS 20

/// The moments of `rows` prepared landmark rows (96 floats each, `row_stride` floats apart: x, y, z
/// of 32 slots, absent slots 0) against a query's weighted terms `lanes` (per slot w·x, w·y, w·z, w;
/// 0 for absent slots): per row Σ w·qx·b, Σ w·qy·b, Σ w·qz·b, Σ w·b and Σ w·b·b, each over the
/// three axes of b, in that order (RK_LANDMARK_MOMENTS doubles per row). Every level adds the same
/// f64 products in the same order (slot 0 to 31, no fused multiply-add): the same bits.
void rk_landmark_moments(int level, const double *lanes, const float *rows, size_t row_stride, size_t count, double *moments);


/// Resizes the mapping at `old` from `old_size` to `new_size` bytes, moving it when it must (Linux
/// mremap, MREMAP_MAYMOVE): the pages move with their contents, nothing is copied, and the old range
/// is gone. NULL when the kernel refuses (a range made of more than one mapping, such as index rows
/// partly mapped from a snapshot); the caller then copies. Here because mremap is variadic, which
/// Swift cannot call.
void *rk_remap(void *old, size_t old_size, size_t new_size);

/// Marks the calling thread as one of the engine's own (its writer, read pool and scan helpers): the
/// threads allowed to scan and to fault on the store's pages. Thread-local, so asking costs a load;
/// here because Swift has no thread-local storage of its own. `name` (at most 15 bytes) is the name
/// `top -H`, `perf` and /proc/PID/task/TID/comm show for it; otherwise it would keep its creator's.
void rk_mark_engine_thread(const char *name);

/// Whether the calling thread was marked by rk_mark_engine_thread.
int rk_is_engine_thread(void);

#ifdef __cplusplus
}
#endif

#endif
