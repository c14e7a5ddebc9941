/*
 * The matrix product the native engine calls (native/model/): C (+)= op(A) @ op(B) with A and C
 * float32 and B float32, bfloat16 or float16 (weights kept in the dtype they came in), row-major,
 * shapes as in gemm.h. It runs on the system BLAS when setBlas("system") chose it and B is float32,
 * and on the project's own kernels otherwise (gemm.c converts B to float32 tile by tile).
 */
#ifndef AGENT_R1_BLAS_H
#define AGENT_R1_BLAS_H

#include <stddef.h>
#include <stdint.h>

/* Element types of a matrix operand. */
enum { DT_F32 = 0, DT_BF16 = 1, DT_F16 = 2 };

/* C (m, n) = op(A) @ op(B), or C += op(A) @ op(B) when accumulate; b_dtype is one of DT_*. */
void blas_gemm(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const void *b,
               int b_dtype, int64_t ldb, float *c, int64_t ldc, int accumulate);

/* Whether the build has a system BLAS; choosing it (on = 1) without one returns 0 and changes nothing. */
int blas_has_system(void);
int blas_use_system(int on);
int blas_uses_system(void);
/* Threads per product, for both implementations. */
void blas_set_threads(int n);
int blas_threads(void);
/* The system BLAS's name and configuration ("" without one). */
void blas_system_name(char *buf, size_t size);

#endif
