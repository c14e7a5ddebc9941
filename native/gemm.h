/*
 * The project's own single-precision matrix product, so the addon builds and runs fast with
 * nothing but a C compiler: C = op(A) @ op(B), or C += op(A) @ op(B), row-major, no alpha/beta;
 * A and C float32, B float32, bfloat16 or float16 (widened to float32 as it is read).
 *
 *   op(A) is (m, k): A itself (m, k) with row stride lda, or, when trans_a, the transpose of
 *         the (k, m) matrix A;
 *   op(B) is (k, n): B (k, n) with row stride ldb, or, when trans_b, the transpose of (n, k);
 *   C is (m, n) with row stride ldc.
 *
 * Blocked as in BLIS and GotoBLAS: panels of B (kc x nc) and of A (mc x kc) are packed into
 * contiguous, zero-padded buffers, and a register-blocked micro-kernel computes MR x NR tiles of
 * C from them. The micro-kernel is chosen once, at run time, from the CPU's features: AVX-512
 * (12 x 32), AVX2 + FMA (6 x 16), or portable C (4 x 16). Several threads split C by rows or
 * columns, each packing its own panels. A half-precision B is widened while it is packed, or, where
 * B is read in place (one or few rows of A), by kernel variants that load halfs.
 *
 * A bfloat16 B (A not transposed) has routes of its own that compute in bfloat16, A rounded to it
 * (nearest even) and the sums float32, as PyTorch does: the kernel "amx" (AMX tiles, gemm_amx.c) where
 * the CPU and the OS have AMX-BF16, else "avx512bf16" (VDPBF16PS, gemm_bf16dot.c) where the CPU has
 * AVX512_BF16; "auto" picks the first the machine runs, then avx512, avx2, portable. Each route forms
 * every element of C the same way whatever else is computed with it (one row alone included), so a
 * row gets the same bits alone as in a batch. Float32 and float16 B (the latter widened exactly, by
 * F16C or AVX-512 conversions the kernel's CPU check guarantees) take the float32 kernels on every
 * route; so does a bfloat16 B with A transposed. own_sgemm_force_kernel refuses a kernel the CPU
 * lacks.
 */
#ifndef AGENT_R1_GEMM_H
#define AGENT_R1_GEMM_H

#include <stdint.h>

#include "blas.h"

void own_sgemm(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
               const float *b, int64_t ldb, float *c, int64_t ldc);

/* The general form: B in dtype b_dtype (DT_F32, DT_BF16 or DT_F16 of blas.h), converted to float32
 * as it is read; with accumulate, C += op(A) @ op(B) instead of C = op(A) @ op(B).
 * own_sgemm(...) is own_gemm(..., b, DT_F32, ldb, c, ldc, 0). */
void own_gemm(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const void *b,
              int b_dtype, int64_t ldb, float *c, int64_t ldc, int accumulate);

/* own_gemm on the calling thread only (for callers that are themselves one of several parallel
 * tasks); B float32 here in practice. Returns 0 when its packing buffers could not be allocated. */
int own_gemm_1t(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const void *b,
                int b_dtype, int64_t ldb, float *c, int64_t ldc, int accumulate);

/* A bf16 B on the AMX tile units (gemm_amx.c): C (m, n) (+)= A @ op(B), A not transposed and rounded
 * to bf16, B bf16 (k, n), or (n, k) when trans_b. Returns 0, with C untouched, when the CPU or the
 * OS has no AMX or a buffer could not be allocated. The "amx" kernel sends every bf16 B here. */
int gemm_amx_available(void);
int gemm_amx_bf16(int trans_b, int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const uint16_t *b,
                  int64_t ldb, float *c, int64_t ldc, int accumulate, int threads);

/* The same product on AVX512_BF16's dot products (gemm_bf16dot.c), with the same contract: A not
 * transposed, rounded to bf16; 0, with C untouched, when a buffer could not be allocated. Call it only
 * where gemm_cpu_has_avx512_bf16(). The "avx512bf16" kernel sends every bf16 B here. */
int gemm_dot_bf16(int trans_b, int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const uint16_t *b,
                  int64_t ldb, float *c, int64_t ldc, int accumulate, int threads);
/* AVX-512 F + FMA + BW + VL + BF16, with the OS's support for the AVX-512 state. */
int gemm_cpu_has_avx512_bf16(void);

/* Threads per call (process-wide; default 1). */
void own_sgemm_set_threads(int threads);
int own_sgemm_threads(void);

/* The micro-kernel in use: "amx" (AVX-512, and AMX for a bf16 B), "avx512bf16" (AVX-512, and
 * AVX512_BF16 for a bf16 B), "avx512", "avx2" or "portable" (the best the CPU runs, unless forced). */
const char *own_sgemm_kernel(void);
/* Forces a kernel by name, or "auto" for the best; 0 when unknown or the CPU cannot run it. */
int own_sgemm_force_kernel(const char *name);

/* Micro-kernels: c (rows x cols, row stride ldc) = or += A (rows x kc) . B (kc x cols), for
 * 1 <= rows <= MR and 1 <= cols <= NR; A's element (i, p) is ap[i * arow + p * astride], step p
 * of B is bp + p * bstride elements of the kernel's B dtype: floats for the plain kernels, bf16 or
 * f16 for the _bf16 / _f16 ones, which widen them to float32 as they load them (cols elements
 * read per step). Nothing past rows x cols of C is touched. */
typedef void (*gemm_ukernel)(int rows, int cols, int64_t kc, const float *ap, int64_t arow, int64_t astride,
                             const void *bp, int64_t bstride, float *c, int64_t ldc, int accumulate);
/* One row of A, B not transposed: c (n) = (or +=, when accumulate) sum over p < k of
 * a[p * astride] * B[p, :], B's rows ldb elements of the function's B dtype apart; summed in blocks
 * of kc steps exactly as the micro-kernels sum (so a row gets the same bits alone as in a batch). */
typedef void (*gemm_gemv)(int64_t k, int64_t n, const float *a, int64_t astride, const void *b, int64_t ldb,
                          float *c, int64_t kc, int accumulate);

/* Float32 value of a bfloat16 (dtype DT_BF16) or IEEE float16 (DT_F16) bit pattern, exact. */
static inline float gemm_half_to_f32(uint16_t h, int dtype) {
  union {
    uint32_t u;
    float f;
  } v;
  if (dtype == DT_BF16) {
    v.u = (uint32_t)h << 16;
    return v.f;
  }
  const uint32_t sign = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, mant = h & 0x3ff;
  if (e == 0) { /* zero or subnormal: mant * 2^-24 */
    v.f = (float)mant * 5.9604644775390625e-8f;
    v.u |= sign;
    return v.f;
  }
  v.u = sign | (e == 31 ? 0x7f800000u | (mant << 13) : ((e + 112) << 23) | (mant << 13));
  return v.f;
}

#if defined(__x86_64__) || defined(_M_X64)
void gemm_ukernel_avx512(int rows, int cols, int64_t kc, const float *ap, int64_t arow, int64_t astride,
                         const void *bp, int64_t bstride, float *c, int64_t ldc, int accumulate);
void gemm_ukernel_avx512_bf16(int rows, int cols, int64_t kc, const float *ap, int64_t arow, int64_t astride,
                              const void *bp, int64_t bstride, float *c, int64_t ldc, int accumulate);
void gemm_ukernel_avx512_f16(int rows, int cols, int64_t kc, const float *ap, int64_t arow, int64_t astride,
                             const void *bp, int64_t bstride, float *c, int64_t ldc, int accumulate);
void gemm_ukernel_avx2(int rows, int cols, int64_t kc, const float *ap, int64_t arow, int64_t astride,
                       const void *bp, int64_t bstride, float *c, int64_t ldc, int accumulate);
void gemm_ukernel_avx2_bf16(int rows, int cols, int64_t kc, const float *ap, int64_t arow, int64_t astride,
                            const void *bp, int64_t bstride, float *c, int64_t ldc, int accumulate);
void gemm_ukernel_avx2_f16(int rows, int cols, int64_t kc, const float *ap, int64_t arow, int64_t astride,
                           const void *bp, int64_t bstride, float *c, int64_t ldc, int accumulate);
void gemm_gemv_avx512(int64_t k, int64_t n, const float *a, int64_t astride, const void *b, int64_t ldb, float *c,
                      int64_t kc, int accumulate);
void gemm_gemv_avx512_bf16(int64_t k, int64_t n, const float *a, int64_t astride, const void *b, int64_t ldb,
                           float *c, int64_t kc, int accumulate);
void gemm_gemv_avx512_f16(int64_t k, int64_t n, const float *a, int64_t astride, const void *b, int64_t ldb,
                          float *c, int64_t kc, int accumulate);
/* One row of A, B transposed (held (n, k), rows ldb elements apart): c (n) (+)= B . a, summed as
 * the micro-kernels sum a packed panel (the same bits). */
void gemm_gemvt_avx512(int64_t k, int64_t n, const float *a, int64_t astride, const void *b, int64_t ldb, float *c,
                       int64_t kc, int accumulate);
void gemm_gemvt_avx512_bf16(int64_t k, int64_t n, const float *a, int64_t astride, const void *b, int64_t ldb,
                            float *c, int64_t kc, int accumulate);
void gemm_gemvt_avx512_f16(int64_t k, int64_t n, const float *a, int64_t astride, const void *b, int64_t ldb,
                           float *c, int64_t kc, int accumulate);
void gemm_gemv_avx2(int64_t k, int64_t n, const float *a, int64_t astride, const void *b, int64_t ldb, float *c,
                    int64_t kc, int accumulate);
void gemm_gemv_avx2_bf16(int64_t k, int64_t n, const float *a, int64_t astride, const void *b, int64_t ldb,
                         float *c, int64_t kc, int accumulate);
void gemm_gemv_avx2_f16(int64_t k, int64_t n, const float *a, int64_t astride, const void *b, int64_t ldb,
                        float *c, int64_t kc, int accumulate);
/* d (kc, 32) = the transpose of the (32, kc) rows of B at src, ldb elements of b_dtype apart, widened. */
void gemm_pack_bt_avx512(const void *src, int b_dtype, int64_t ldb, int64_t kc, float *d);
/* d (kc, NR) = the (kc, cols) panel of a bf16 / f16 B at src (rows ldb apart, cols <= NR), widened;
 * columns past cols zero. NR = 32 for AVX-512, 16 for AVX2. */
void gemm_pack_bn_avx512(const uint16_t *src, int b_dtype, int64_t ldb, int64_t kc, int cols, float *d);
void gemm_pack_bn_avx2(const uint16_t *src, int b_dtype, int64_t ldb, int64_t kc, int cols, float *d);
/* d (kc, 12) = the (rows <= 12, kc) rows of A, lda floats apart, transposed; rows past `rows` zero. */
void gemm_pack_an_avx512(const float *src, int64_t lda, int64_t kc, int rows, float *d);
/* AVX-512 F + FMA; AVX2 + FMA + F16C. */
int gemm_cpu_has_avx512(void);
int gemm_cpu_has_avx2(void);
#endif

#endif
