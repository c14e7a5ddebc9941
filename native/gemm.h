/*
 * The project's own single-precision matrix product, so the addon builds and runs fast with
 * nothing but a C compiler: C = op(A) @ op(B), row-major, no alpha/beta (C is overwritten).
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
 * columns, each packing its own panels.
 */
#ifndef AGENT_R1_GEMM_H
#define AGENT_R1_GEMM_H

#include <stdint.h>

void own_sgemm(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
               const float *b, int64_t ldb, float *c, int64_t ldc);

/* Threads per call (process-wide; default 1). */
void own_sgemm_set_threads(int threads);
int own_sgemm_threads(void);

/* The micro-kernel in use: "avx512", "avx2" or "portable" (the best the CPU runs, unless forced). */
const char *own_sgemm_kernel(void);
/* Forces a kernel by name, or "auto" for the best; 0 when unknown or the CPU cannot run it. */
int own_sgemm_force_kernel(const char *name);

/* Micro-kernels: c (rows x cols, row stride ldc) = or += A (rows x kc) . B (kc x cols), for
 * 1 <= rows <= MR and 1 <= cols <= NR; A's element (i, p) is ap[i * arow + p * astride], step p
 * of B is bp + p * bstride (cols floats read). Nothing past rows x cols of C is touched. */
typedef void (*gemm_ukernel)(int rows, int cols, int64_t kc, const float *ap, int64_t arow, int64_t astride,
                             const float *bp, int64_t bstride, float *c, int64_t ldc, int accumulate);

#if defined(__x86_64__) || defined(_M_X64)
void gemm_ukernel_avx512(int rows, int cols, int64_t kc, const float *ap, int64_t arow, int64_t astride,
                         const float *bp, int64_t bstride, float *c, int64_t ldc, int accumulate);
void gemm_ukernel_avx2(int rows, int cols, int64_t kc, const float *ap, int64_t arow, int64_t astride,
                       const float *bp, int64_t bstride, float *c, int64_t ldc, int accumulate);
/* c (n) = sum over p < k of a[p * astride] * B[p, :] (B rows ldb apart): one row of A, summed in
 * blocks of kc steps as the micro-kernels sum (so a row gets the same bits alone as in a batch). */
void gemm_gemv_avx512(int64_t k, int64_t n, const float *a, int64_t astride, const float *b, int64_t ldb, float *c,
                      int64_t kc);
void gemm_gemv_avx2(int64_t k, int64_t n, const float *a, int64_t astride, const float *b, int64_t ldb, float *c,
                    int64_t kc);
/* d (kc, 32) = the transpose of the (32, kc) rows of B at src, ldb apart. */
void gemm_pack_bt_avx512(const float *src, int64_t ldb, int64_t kc, float *d);
int gemm_cpu_has_avx512(void);
int gemm_cpu_has_avx2(void);
#endif

#endif
