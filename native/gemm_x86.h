/*
 * What the x86-64 micro-kernels share (gemm_x86.c for AVX-512, gemm_avx2.c for AVX2): the inlining
 * attribute, element sizes, how a kernel reaches a row of A, and the one-row (GEMV) skeleton both
 * instruction sets instantiate. Private to those two files.
 */
#ifndef AGENT_R1_GEMM_X86_H
#define AGENT_R1_GEMM_X86_H

#include "gemm.h"

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>

#define INLINE static inline __attribute__((always_inline))
/* The AVX-512 kernels' instruction set (gemm_x86.c; gemm_bf16dot.c adds the bf16 dot products). */
#define T512 __attribute__((target("avx512f,fma")))

/* A micro-kernel compiled for one row count (the tables index them by rows). */
typedef void (*rows_kernel)(int cols, int64_t kc, const float *ap, int64_t arow, int64_t astride, const void *bp,
                            int64_t bstride, float *c, int64_t ldc, int accumulate);

/* col[q] (16) = element q of each of r[0..16): a (16, 16) block transposed in registers. */
T512 INLINE void transpose16_vecs(const __m512 *r, __m512 *col) {
  __m512 t[16], u[16], v[16];
  for (int i = 0; i < 8; i++) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 4; i++) {
    const __m512d a = _mm512_castps_pd(t[4 * i]), b = _mm512_castps_pd(t[4 * i + 1]);
    const __m512d c = _mm512_castps_pd(t[4 * i + 2]), d = _mm512_castps_pd(t[4 * i + 3]);
    u[4 * i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
    u[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
    u[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
    u[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
  }
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 4; j++) {
      v[8 * i + j] = _mm512_shuffle_f32x4(u[8 * i + j], u[8 * i + 4 + j], 0x88);
      v[8 * i + 4 + j] = _mm512_shuffle_f32x4(u[8 * i + j], u[8 * i + 4 + j], 0xdd);
    }
  for (int j = 0; j < 8; j++) {
    col[j] = _mm512_shuffle_f32x4(v[j], v[8 + j], 0x88);
    col[8 + j] = _mm512_shuffle_f32x4(v[j], v[8 + j], 0xdd);
  }
}

/* Bytes per element of B. */
#define ESZ(BT) ((BT) == DT_F32 ? 4 : 2)

/* A's element (i, p - p0) of the current step: ap[i] when packed (arow 1), else row i's pointer. */
#define A_AT(i) \
  (rows_a ? ((i) < 3 ? a0 : (i) < 6 ? a3 : (i) < 9 ? a6 : a9)[((i) % 3) * arow] : ap[i])

/* ---- One row of A (a decode step of batch 1): c (n) = sum over p of a[p * astride] * B[p, :]. ----
 * B's rows are read whole and in order, four at a time (four streams the prefetcher follows), into
 * a chunk of c that stays in L1; the packed path would read B in column panels, a row or more
 * apart, which is slow when B comes from memory, as it does once per token. The sums are formed
 * exactly as the micro-kernel forms them (fused multiply-adds in order of p from zero within each
 * block of kc steps, each block's sum then added to c), so a row gets the same bits alone as in a
 * batch: sampling does not depend on which sequences share a decode step. A bf16 / f16 B is
 * widened as it is loaded (exactly), so the same holds for it, and half the bytes are read. */
#define GEMV_CHUNK 2048 /* floats of c per pass over B's rows */

/* The skeleton, for both instruction sets: SUF names the helpers gemv_fma<SUF> (t (W) += rows of B
 * times av, in order) and gemv_out<SUF> (c (W) = t, or t + c), W floats per vector. Whole vectors
 * run with full = 1; the last, partial one (cols % W columns: mask m, halfs h) with full = 0. */
#define GEMV_BODY(SUF, BT, VEC, W, ZERO, STORE, SET1, MASK_T, MASK_MAKE, PART_T, PART_MAKE)                         \
  const int64_t esz = ESZ(BT), ldbb = ldb * esz; /* bytes per element of B, between rows of B */                  \
  float t[GEMV_CHUNK] __attribute__((aligned(64))); /* (cols) one block's sums */                                  \
  for (int64_t j0 = 0; j0 < n; j0 += GEMV_CHUNK) {                                                                  \
    const int64_t cols = n - j0 < GEMV_CHUNK ? n - j0 : GEMV_CHUNK, whole = cols - cols % W;                        \
    const MASK_T m = MASK_MAKE((int)(cols - whole));                                                                \
    const PART_T h = PART_MAKE((int)(cols - whole));                                                                \
    float *cc = c + j0;                          /* (cols) */                                                       \
    const char *bc = (const char *)b + j0 * esz; /* (k, cols) B's columns j0.., rows ldbb bytes apart */            \
    for (int64_t pc = 0; pc < k; pc += kc) {                                                                        \
      const int64_t pend = k - pc < kc ? k : pc + kc;                                                               \
      for (int64_t j = 0; j < cols; j += W) STORE(t + j, ZERO);                                                     \
      int64_t p = pc;                                                                                               \
      for (; p + 4 <= pend; p += 4) {                                                                               \
        const VEC av[4] = {SET1(a[p * astride]), SET1(a[(p + 1) * astride]), SET1(a[(p + 2) * astride]),            \
                           SET1(a[(p + 3) * astride])};                                                             \
        const char *br = bc + p * ldbb; /* rows p..p+3 */                                                           \
        int64_t j = 0;                                                                                              \
        for (; j < whole; j += W) gemv_fma##SUF(BT, 1, 4, av, br + j * esz, ldbb, t + j, m, &h);                    \
        if (j < cols) gemv_fma##SUF(BT, 0, 4, av, br + j * esz, ldbb, t + j, m, &h);                                \
      }                                                                                                             \
      for (; p < pend; p++) {                                                                                       \
        const VEC av[1] = {SET1(a[p * astride])};                                                                   \
        const char *br = bc + p * ldbb; /* row p */                                                                 \
        int64_t j = 0;                                                                                              \
        for (; j < whole; j += W) gemv_fma##SUF(BT, 1, 1, av, br + j * esz, ldbb, t + j, m, &h);                    \
        if (j < cols) gemv_fma##SUF(BT, 0, 1, av, br + j * esz, ldbb, t + j, m, &h);                                \
      }                                                                                                             \
      const int add = pc > 0 || accumulate;                                                                         \
      int64_t j = 0;                                                                                                \
      for (; j < whole; j += W) gemv_out##SUF(1, add, t + j, cc + j, m);                                            \
      if (j < cols) gemv_out##SUF(0, add, t + j, cc + j, m);                                                        \
    }                                                                                                               \
  }

#endif

#endif
