/*
 * x86-64 micro-kernels of own_sgemm (gemm.c). Each is compiled for its instruction set with a
 * target attribute, so one binary runs on every x86-64 CPU: gemm.c calls a kernel only after
 * checking, at run time, that the CPU and the OS support it.
 *
 * A call computes one tile of C of rows <= MR and cols <= NR over kc steps of k:
 *   ap: A, element (i, p) at ap[i * arow + p * astride]: packed (arow 1, astride MR), or read in
 *       place (arow 1, astride lda for a transposed A; arow lda, astride 1 for A itself);
 *   bp: B, NR floats per step (only cols of them are read), steps bstride floats apart;
 *   c:  (rows, cols) tile of C, row stride ldc; written, or added to when accumulate.
 * Every accumulator stays in a register for the whole k loop: per step, NR / W loads of B,
 * rows broadcasts of A, rows * NR / W fused multiply-adds (W = floats per vector). Each row
 * count has its own compiled body (the row loops unroll to straight code), and partial columns
 * use masked loads and stores, so edge tiles run at full speed with no copies. With arow > 1 the
 * rows of A are reached from four row pointers (rows 0, 3, 6, 9) plus 0, 1 or 2 times arow, which
 * x86 addressing does without extra registers.
 */
#include "gemm.h"

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>

int gemm_cpu_has_avx512(void) {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma");
}

int gemm_cpu_has_avx2(void) {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

#define INLINE static inline __attribute__((always_inline))

/* ---- AVX-512: MR = 12 rows x NR = 32 columns (two 16-float vectors): up to 24 accumulators. ---- */

#define T512 __attribute__((target("avx512f,fma")))

/* A's element (i, p - p0) of the current step: ap[i] when packed (arow 1), else row i's pointer. */
#define A_AT(i) \
  (rows_a ? ((i) < 3 ? a0 : (i) < 6 ? a3 : (i) < 9 ? a6 : a9)[((i) % 3) * arow] : ap[i])

T512 INLINE void body512(const int R, const int full, const int rows_a, int cols, int64_t kc, const float *ap,
                         int64_t arow, int64_t astride, const float *bp, int64_t bstride, float *c, int64_t ldc,
                         int accumulate) {
  const float *a0 = ap, *a3 = R > 3 ? ap + 3 * arow : ap, *a6 = R > 6 ? ap + 6 * arow : ap,
              *a9 = R > 9 ? ap + 9 * arow : ap; /* row pointers when rows_a */
  /* lanes of columns 0-15 and 16-31 that exist */
  const __mmask16 m0 = cols >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << cols) - 1u);
  const __mmask16 m1 = cols >= 32 ? (__mmask16)0xFFFF : cols <= 16 ? 0 : (__mmask16)((1u << (cols - 16)) - 1u);
  __m512 lo[12], hi[12]; /* (R, 32) tile */
#pragma GCC unroll 12
  for (int i = 0; i < 12; i++)
    if (i < R) lo[i] = hi[i] = _mm512_setzero_ps();
  for (int64_t p = 0; p < kc; p++) {
    /* B read in place has its rows far apart (often a page or more): fetch 16 rows ahead */
    _mm_prefetch((const char *)(bp + 16 * bstride), _MM_HINT_T0);
    _mm_prefetch((const char *)(bp + 16 * bstride + 16), _MM_HINT_T0);
    /* (1, 32) row p of B */
    const __m512 b0 = full ? _mm512_loadu_ps(bp) : _mm512_maskz_loadu_ps(m0, bp);
    const __m512 b1 = full ? _mm512_loadu_ps(bp + 16) : _mm512_maskz_loadu_ps(m1, bp + 16);
#pragma GCC unroll 12
    for (int i = 0; i < 12; i++) {
      if (i < R) {
        const __m512 a = _mm512_set1_ps(A_AT(i));
        lo[i] = _mm512_fmadd_ps(a, b0, lo[i]);
        hi[i] = _mm512_fmadd_ps(a, b1, hi[i]);
      }
    }
    ap += astride;
    a0 += astride;
    a3 += astride;
    a6 += astride;
    a9 += astride;
    bp += bstride;
  }
#pragma GCC unroll 12
  for (int i = 0; i < 12; i++) {
    if (i < R) {
      float *r = c + i * ldc; /* (cols) row i of the tile */
      if (full) {
        if (accumulate) {
          lo[i] = _mm512_add_ps(lo[i], _mm512_loadu_ps(r));
          hi[i] = _mm512_add_ps(hi[i], _mm512_loadu_ps(r + 16));
        }
        _mm512_storeu_ps(r, lo[i]);
        _mm512_storeu_ps(r + 16, hi[i]);
      } else {
        if (accumulate) {
          lo[i] = _mm512_add_ps(lo[i], _mm512_maskz_loadu_ps(m0, r));
          hi[i] = _mm512_add_ps(hi[i], _mm512_maskz_loadu_ps(m1, r + 16));
        }
        _mm512_mask_storeu_ps(r, m0, lo[i]);
        _mm512_mask_storeu_ps(r + 16, m1, hi[i]);
      }
    }
  }
}

#define K512(R)                                                                                                     \
  T512 static void k512_##R(int cols, int64_t kc, const float *ap, int64_t arow, int64_t astride, const float *bp,  \
                            int64_t bstride, float *c, int64_t ldc, int accumulate) {                               \
    if (arow == 1) {                                                                                                \
      if (cols == 32)                                                                                               \
        body512(R, 1, 0, cols, kc, ap, arow, astride, bp, bstride, c, ldc, accumulate);                             \
      else                                                                                                          \
        body512(R, 0, 0, cols, kc, ap, arow, astride, bp, bstride, c, ldc, accumulate);                             \
    } else if (cols == 32) {                                                                                        \
      body512(R, 1, 1, cols, kc, ap, arow, astride, bp, bstride, c, ldc, accumulate);                               \
    } else {                                                                                                        \
      body512(R, 0, 1, cols, kc, ap, arow, astride, bp, bstride, c, ldc, accumulate);                               \
    }                                                                                                               \
  }
K512(1) K512(2) K512(3) K512(4) K512(5) K512(6) K512(7) K512(8) K512(9) K512(10) K512(11) K512(12)

typedef void (*rows_kernel)(int cols, int64_t kc, const float *ap, int64_t arow, int64_t astride, const float *bp,
                            int64_t bstride, float *c, int64_t ldc, int accumulate);

static const rows_kernel K512_BY_ROWS[13] = {NULL,    k512_1,  k512_2, k512_3,  k512_4,  k512_5, k512_6,
                                             k512_7, k512_8, k512_9, k512_10, k512_11, k512_12};

void gemm_ukernel_avx512(int rows, int cols, int64_t kc, const float *ap, int64_t arow, int64_t astride,
                         const float *bp, int64_t bstride, float *c, int64_t ldc, int accumulate) {
  K512_BY_ROWS[rows](cols, kc, ap, arow, astride, bp, bstride, c, ldc, accumulate);
}

/* ---- AVX2 + FMA: MR = 6 rows x NR = 16 columns (two 8-float vectors): up to 12 accumulators. ---- */

#define T256 __attribute__((target("avx2,fma")))

/* Lane masks of _mm256_maskload_ps for the first n (0..8) columns. */
T256 INLINE __m256i mask256(int n) {
  const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), idx);
}

T256 INLINE void body256(const int R, const int full, const int rows_a, int cols, int64_t kc, const float *ap,
                         int64_t arow, int64_t astride, const float *bp, int64_t bstride, float *c, int64_t ldc,
                         int accumulate) {
  const float *a0 = ap, *a3 = R > 3 ? ap + 3 * arow : ap, *a6 = ap, *a9 = ap; /* row pointers when rows_a */
  const __m256i m0 = mask256(cols >= 8 ? 8 : cols), m1 = mask256(cols >= 16 ? 8 : cols <= 8 ? 0 : cols - 8);
  __m256 lo[6], hi[6]; /* (R, 16) tile */
#pragma GCC unroll 6
  for (int i = 0; i < 6; i++)
    if (i < R) lo[i] = hi[i] = _mm256_setzero_ps();
  for (int64_t p = 0; p < kc; p++) {
    /* (1, 16) row p of B */
    const __m256 b0 = full ? _mm256_loadu_ps(bp) : _mm256_maskload_ps(bp, m0);
    const __m256 b1 = full ? _mm256_loadu_ps(bp + 8) : _mm256_maskload_ps(bp + 8, m1);
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
    bp += bstride;
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

#define K256(R)                                                                                                     \
  T256 static void k256_##R(int cols, int64_t kc, const float *ap, int64_t arow, int64_t astride, const float *bp,  \
                            int64_t bstride, float *c, int64_t ldc, int accumulate) {                               \
    if (arow == 1) {                                                                                                \
      if (cols == 16)                                                                                               \
        body256(R, 1, 0, cols, kc, ap, arow, astride, bp, bstride, c, ldc, accumulate);                             \
      else                                                                                                          \
        body256(R, 0, 0, cols, kc, ap, arow, astride, bp, bstride, c, ldc, accumulate);                             \
    } else if (cols == 16) {                                                                                        \
      body256(R, 1, 1, cols, kc, ap, arow, astride, bp, bstride, c, ldc, accumulate);                               \
    } else {                                                                                                        \
      body256(R, 0, 1, cols, kc, ap, arow, astride, bp, bstride, c, ldc, accumulate);                               \
    }                                                                                                               \
  }
K256(1) K256(2) K256(3) K256(4) K256(5) K256(6)

static const rows_kernel K256_BY_ROWS[7] = {NULL, k256_1, k256_2, k256_3, k256_4, k256_5, k256_6};

void gemm_ukernel_avx2(int rows, int cols, int64_t kc, const float *ap, int64_t arow, int64_t astride,
                       const float *bp, int64_t bstride, float *c, int64_t ldc, int accumulate) {
  K256_BY_ROWS[rows](cols, kc, ap, arow, astride, bp, bstride, c, ldc, accumulate);
}

/* ---- One row of A (a decode step of batch 1): c (n) = sum over p of a[p * astride] * B[p, :]. ----
 * B's rows are read whole and in order, four at a time (four streams the prefetcher follows), into
 * a chunk of c that stays in L1; the packed path would read B in column panels, a row or more
 * apart, which is slow when B comes from memory, as it does once per token. The sums are formed
 * exactly as the micro-kernel forms them (fused multiply-adds in order of p from zero within each
 * block of kc steps, each block's sum then added to c), so a row gets the same bits alone as in a
 * batch: sampling does not depend on which sequences share a decode step. */
#define GEMV_CHUNK 2048 /* floats of c per pass over B's rows */

#define GEMV_BODY(VEC, W, ZERO, LOAD, STORE, FMA, ADD, SET1, MASKDECL)                                             \
  float t[GEMV_CHUNK] __attribute__((aligned(64))); /* (cols) one block's sums */                                  \
  for (int64_t j0 = 0; j0 < n; j0 += GEMV_CHUNK) {                                                                  \
    const int64_t cols = n - j0 < GEMV_CHUNK ? n - j0 : GEMV_CHUNK;                                                 \
    float *cc = c + j0; /* (cols) */                                                                                \
    for (int64_t pc = 0; pc < k; pc += kc) {                                                                        \
      const int64_t pend = k - pc < kc ? k : pc + kc;                                                               \
      for (int64_t j = 0; j < cols; j += W) {                                                                       \
        MASKDECL;                                                                                                   \
        STORE(t + j, ZERO);                                                                                         \
      }                                                                                                             \
      int64_t p = pc;                                                                                               \
      for (; p + 4 <= pend; p += 4) {                                                                               \
        const float *b0 = b + p * ldb + j0, *b1 = b0 + ldb, *b2 = b1 + ldb, *b3 = b2 + ldb; /* rows p..p+3 */       \
        const VEC a0 = SET1(a[p * astride]), a1 = SET1(a[(p + 1) * astride]);                                       \
        const VEC a2 = SET1(a[(p + 2) * astride]), a3 = SET1(a[(p + 3) * astride]);                                 \
        for (int64_t j = 0; j < cols; j += W) {                                                                     \
          MASKDECL;                                                                                                 \
          VEC s = LOAD(t + j);                                                                                      \
          s = FMA(a0, LOAD(b0 + j), s);                                                                             \
          s = FMA(a1, LOAD(b1 + j), s);                                                                             \
          s = FMA(a2, LOAD(b2 + j), s);                                                                             \
          s = FMA(a3, LOAD(b3 + j), s);                                                                             \
          STORE(t + j, s);                                                                                          \
        }                                                                                                           \
      }                                                                                                             \
      for (; p < pend; p++) {                                                                                       \
        const float *b0 = b + p * ldb + j0; /* row p */                                                             \
        const VEC a0 = SET1(a[p * astride]);                                                                        \
        for (int64_t j = 0; j < cols; j += W) {                                                                     \
          MASKDECL;                                                                                                 \
          STORE(t + j, FMA(a0, LOAD(b0 + j), LOAD(t + j)));                                                         \
        }                                                                                                           \
      }                                                                                                             \
      for (int64_t j = 0; j < cols; j += W) {                                                                       \
        MASKDECL;                                                                                                   \
        STORE(cc + j, pc == 0 ? LOAD(t + j) : ADD(LOAD(t + j), LOAD(cc + j)));                                      \
      }                                                                                                             \
    }                                                                                                               \
  }

#define M512 const __mmask16 m = cols - j >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (cols - j)) - 1u)
#define LD512(x) _mm512_maskz_loadu_ps(m, (x))
#define ST512(x, v) _mm512_mask_storeu_ps((x), m, (v))

T512 void gemm_gemv_avx512(int64_t k, int64_t n, const float *a, int64_t astride, const float *b, int64_t ldb,
                           float *c, int64_t kc) {
  GEMV_BODY(__m512, 16, _mm512_setzero_ps(), LD512, ST512, _mm512_fmadd_ps, _mm512_add_ps, _mm512_set1_ps, M512)
}

#define M256 const __m256i m = mask256(cols - j >= 8 ? 8 : (int)(cols - j))
#define LD256(x) _mm256_maskload_ps((x), m)
#define ST256(x, v) _mm256_maskstore_ps((x), m, (v))

T256 void gemm_gemv_avx2(int64_t k, int64_t n, const float *a, int64_t astride, const float *b, int64_t ldb, float *c,
                         int64_t kc) {
  GEMV_BODY(__m256, 8, _mm256_setzero_ps(), LD256, ST256, _mm256_fmadd_ps, _mm256_add_ps, _mm256_set1_ps, M256)
}

/* ---- Packing a transposed B for the AVX-512 kernel: d (kc, 32) = the (32, kc) rows of B,
 * ldb apart, transposed, 16 x 16 blocks at a time in registers. ---- */
T512 static void transpose16(const float *src, int64_t ld, float *dst, int64_t ldd) {
  __m512 r[16], t[16], u[16], v[16];
  for (int i = 0; i < 16; i++) r[i] = _mm512_loadu_ps(src + i * ld); /* (16, 16) block */
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
    _mm512_storeu_ps(dst + j * ldd, _mm512_shuffle_f32x4(v[j], v[8 + j], 0x88));
    _mm512_storeu_ps(dst + (8 + j) * ldd, _mm512_shuffle_f32x4(v[j], v[8 + j], 0xdd));
  }
}

T512 void gemm_pack_bt_avx512(const float *src, int64_t ldb, int64_t kc, float *d) {
  int64_t p = 0;
  for (; p + 16 <= kc; p += 16) {
    transpose16(src + p, ldb, d + p * 32, 32);                 /* columns 0-15 of the panel */
    transpose16(src + 16 * ldb + p, ldb, d + p * 32 + 16, 32); /* columns 16-31 */
  }
  for (; p < kc; p++)
    for (int j = 0; j < 32; j++) d[p * 32 + j] = src[j * ldb + p];
}

#endif
