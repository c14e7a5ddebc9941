/*
 * The AVX2 + FMA micro-kernels of own_sgemm (gemm.c), for x86-64 CPUs without AVX-512: the same
 * contract and structure as the AVX-512 ones (gemm_x86.c, whose header describes both), 8 floats
 * per vector, and the one-row product and half-precision B packing for that width.
 */
#include "gemm_x86.h"

#if defined(__x86_64__) || defined(_M_X64)

int gemm_cpu_has_avx2(void) {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
}

/* ---- AVX2 + FMA: MR = 6 rows x NR = 16 columns (two 8-float vectors): up to 12 accumulators. ---- */

#define T256 __attribute__((target("avx2,fma,f16c")))

/* Lane masks of _mm256_maskload_ps for the first n (0..8) columns. */
T256 INLINE __m256i mask256(int n) {
  const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), idx);
}

/* The first n (0..8) of 8 halfs, as a partial load: n / 2 whole pairs, then the odd last half. */
typedef struct {
  __m128i pairs; /* (4) dword lanes loaded */
  __m128i last;  /* (8) the lane of half n - 1 */
  int odd, n;
} part8;

T256 INLINE part8 part8_make(int n) {
  part8 h;
  h.pairs = _mm_cmpgt_epi32(_mm_set1_epi32(n >> 1), _mm_setr_epi32(0, 1, 2, 3));
  h.last = _mm_cmpeq_epi16(_mm_set1_epi16((short)(n - 1)), _mm_setr_epi16(0, 1, 2, 3, 4, 5, 6, 7));
  h.odd = n & 1;
  h.n = n;
  return h;
}

/* 8 floats of B at p (a byte address): floats loaded, bf16 / f16 widened; with full = 0 only the
 * lanes of mask m (floats) or of h (halfs) are read, the others are zero. */
T256 INLINE __m256 load_b8(const int BT, const int full, const char *p, __m256i m, const part8 *h) {
  if (BT == DT_F32) return full ? _mm256_loadu_ps((const float *)p) : _mm256_maskload_ps((const float *)p, m);
  __m128i x; /* (8) halfs */
  if (full) {
    x = _mm_loadu_si128((const __m128i *)p);
  } else {
    x = _mm_maskload_epi32((const int *)p, h->pairs);
    if (h->odd) x = _mm_or_si128(x, _mm_and_si128(h->last, _mm_set1_epi16(((const short *)p)[h->n - 1])));
  }
  if (BT == DT_BF16) return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(x), 16));
  return _mm256_cvtph_ps(x);
}

T256 INLINE void body256(const int BT, const int R, const int full, const int rows_a, int cols, int64_t kc,
                         const float *ap, int64_t arow, int64_t astride, const void *bp, int64_t bstride, float *c,
                         int64_t ldc, int accumulate) {
  const float *a0 = ap, *a3 = R > 3 ? ap + 3 * arow : ap, *a6 = ap, *a9 = ap; /* row pointers when rows_a */
  const char *bb = (const char *)bp; /* (1, cols) step p of B, bsb bytes apart */
  const int64_t bsb = bstride * ESZ(BT);
  const __m256i m0 = mask256(cols >= 8 ? 8 : cols), m1 = mask256(cols >= 16 ? 8 : cols <= 8 ? 0 : cols - 8);
  const part8 h0 = part8_make(cols >= 8 ? 8 : cols), h1 = part8_make(cols >= 16 ? 8 : cols <= 8 ? 0 : cols - 8);
  __m256 lo[6], hi[6]; /* (R, 16) tile */
#pragma GCC unroll 6
  for (int i = 0; i < 6; i++)
    if (i < R) lo[i] = hi[i] = _mm256_setzero_ps();
  for (int64_t p = 0; p < kc; p++) {
    /* (1, 16) row p of B */
    const __m256 b0 = load_b8(BT, full, bb, m0, &h0);
    const __m256 b1 = load_b8(BT, full, bb + 8 * ESZ(BT), m1, &h1);
#pragma GCC unroll 6
    for (int i = 0; i < 6; i++) {
      if (i < R) {
        const __m256 a = _mm256_set1_ps(A_AT(i));
        lo[i] = _mm256_fmadd_ps(a, b0, lo[i]);
        hi[i] = _mm256_fmadd_ps(a, b1, hi[i]);
      }
    }
    ap += astride;
    a0 += astride;
    a3 += astride;
    bb += bsb;
  }
#pragma GCC unroll 6
  for (int i = 0; i < 6; i++) {
    if (i < R) {
      float *r = c + i * ldc; /* (cols) row i of the tile */
      if (full) {
        if (accumulate) {
          lo[i] = _mm256_add_ps(lo[i], _mm256_loadu_ps(r));
          hi[i] = _mm256_add_ps(hi[i], _mm256_loadu_ps(r + 8));
        }
        _mm256_storeu_ps(r, lo[i]);
        _mm256_storeu_ps(r + 8, hi[i]);
      } else {
        if (accumulate) {
          lo[i] = _mm256_add_ps(lo[i], _mm256_maskload_ps(r, m0));
          hi[i] = _mm256_add_ps(hi[i], _mm256_maskload_ps(r + 8, m1));
        }
        _mm256_maskstore_ps(r, m0, lo[i]);
        _mm256_maskstore_ps(r + 8, m1, hi[i]);
      }
    }
  }
}

/* k256_<dtype>_<R>: R rows, B in dtype BT; the four bodies by full width and A in place or packed. */
#define K256_T(R, BT, SUF)                                                                                         \
  T256 static void k256_##SUF##_##R(int cols, int64_t kc, const float *ap, int64_t arow, int64_t astride,           \
                                    const void *bp, int64_t bstride, float *c, int64_t ldc, int accumulate) {       \
    if (arow == 1) {                                                                                                \
      if (cols == 16)                                                                                               \
        body256(BT, R, 1, 0, cols, kc, ap, arow, astride, bp, bstride, c, ldc, accumulate);                         \
      else                                                                                                          \
        body256(BT, R, 0, 0, cols, kc, ap, arow, astride, bp, bstride, c, ldc, accumulate);                         \
    } else if (cols == 16) {                                                                                        \
      body256(BT, R, 1, 1, cols, kc, ap, arow, astride, bp, bstride, c, ldc, accumulate);                           \
    } else {                                                                                                        \
      body256(BT, R, 0, 1, cols, kc, ap, arow, astride, bp, bstride, c, ldc, accumulate);                           \
    }                                                                                                               \
  }
#define K256(R) K256_T(R, DT_F32, f32) K256_T(R, DT_BF16, bf16) K256_T(R, DT_F16, f16)
K256(1) K256(2) K256(3) K256(4) K256(5) K256(6)

#define ROWS6(SUF) \
  { NULL, k256_##SUF##_1, k256_##SUF##_2, k256_##SUF##_3, k256_##SUF##_4, k256_##SUF##_5, k256_##SUF##_6 }
static const rows_kernel K256_BY_ROWS[3][7] = {ROWS6(f32), ROWS6(bf16), ROWS6(f16)}; /* [DT_*][rows] */

void gemm_ukernel_avx2(int rows, int cols, int64_t kc, const float *ap, int64_t arow, int64_t astride,
                       const void *bp, int64_t bstride, float *c, int64_t ldc, int accumulate) {
  K256_BY_ROWS[DT_F32][rows](cols, kc, ap, arow, astride, bp, bstride, c, ldc, accumulate);
}
void gemm_ukernel_avx2_bf16(int rows, int cols, int64_t kc, const float *ap, int64_t arow, int64_t astride,
                            const void *bp, int64_t bstride, float *c, int64_t ldc, int accumulate) {
  K256_BY_ROWS[DT_BF16][rows](cols, kc, ap, arow, astride, bp, bstride, c, ldc, accumulate);
}
void gemm_ukernel_avx2_f16(int rows, int cols, int64_t kc, const float *ap, int64_t arow, int64_t astride,
                           const void *bp, int64_t bstride, float *c, int64_t ldc, int accumulate) {
  K256_BY_ROWS[DT_F16][rows](cols, kc, ap, arow, astride, bp, bstride, c, ldc, accumulate);
}

/* As gemv_fma512 and gemv_out512, 8 floats wide. */
T256 INLINE void gemv_fma256(const int BT, const int full, const int rows, const __m256 *av, const char *br,
                             int64_t ldbb, float *t, __m256i m, const part8 *h) {
  __m256 s = _mm256_load_ps(t);
  if (rows == 4) /* as in gemv_fma512 */
    for (int r = 4; r < 8; r++) _mm_prefetch(br + r * ldbb, _MM_HINT_T0);
  for (int r = 0; r < rows; r++) s = _mm256_fmadd_ps(av[r], load_b8(BT, full, br + r * ldbb, m, h), s);
  _mm256_store_ps(t, s);
}

T256 INLINE void gemv_out256(const int full, int add, const float *t, float *cc, __m256i m) {
  __m256 s = _mm256_load_ps(t);
  if (add) s = _mm256_add_ps(s, full ? _mm256_loadu_ps(cc) : _mm256_maskload_ps(cc, m));
  if (full)
    _mm256_storeu_ps(cc, s);
  else
    _mm256_maskstore_ps(cc, m, s);
}

T256 INLINE void gemv256(const int BT, int64_t k, int64_t n, const float *a, int64_t astride, const void *b,
                         int64_t ldb, float *c, int64_t kc, int accumulate) {
  GEMV_BODY(256, BT, __m256, 8, _mm256_setzero_ps(), _mm256_store_ps, _mm256_set1_ps, __m256i, mask256, part8,
            part8_make)
}

T256 void gemm_gemv_avx2(int64_t k, int64_t n, const float *a, int64_t astride, const void *b, int64_t ldb, float *c,
                         int64_t kc, int accumulate) {
  gemv256(DT_F32, k, n, a, astride, b, ldb, c, kc, accumulate);
}
T256 void gemm_gemv_avx2_bf16(int64_t k, int64_t n, const float *a, int64_t astride, const void *b, int64_t ldb,
                              float *c, int64_t kc, int accumulate) {
  gemv256(DT_BF16, k, n, a, astride, b, ldb, c, kc, accumulate);
}
T256 void gemm_gemv_avx2_f16(int64_t k, int64_t n, const float *a, int64_t astride, const void *b, int64_t ldb,
                             float *c, int64_t kc, int accumulate) {
  gemv256(DT_F16, k, n, a, astride, b, ldb, c, kc, accumulate);
}

T256 INLINE void pack_bn256(const int BT, const int full, const uint16_t *src, int64_t ldb, int64_t kc, int cols,
                            float *d) {
  const __m256i m0 = mask256(cols >= 8 ? 8 : cols), m1 = mask256(cols >= 16 ? 8 : cols <= 8 ? 0 : cols - 8);
  const part8 h0 = part8_make(cols >= 8 ? 8 : cols), h1 = part8_make(cols >= 16 ? 8 : cols <= 8 ? 0 : cols - 8);
  for (int64_t p = 0; p < kc; p++) {
    const char *r = (const char *)(src + p * ldb); /* (cols) halfs of step p */
    _mm256_storeu_ps(d + p * 16, load_b8(BT, full, r, m0, &h0));
    _mm256_storeu_ps(d + p * 16 + 8, load_b8(BT, full, r + 16, m1, &h1));
  }
}

T256 void gemm_pack_bn_avx2(const uint16_t *src, int b_dtype, int64_t ldb, int64_t kc, int cols, float *d) {
  if (b_dtype == DT_BF16) {
    if (cols == 16)
      pack_bn256(DT_BF16, 1, src, ldb, kc, cols, d);
    else
      pack_bn256(DT_BF16, 0, src, ldb, kc, cols, d);
  } else if (cols == 16) {
    pack_bn256(DT_F16, 1, src, ldb, kc, cols, d);
  } else {
    pack_bn256(DT_F16, 0, src, ldb, kc, cols, d);
  }
}

#endif
