/*
 * x86-64 micro-kernels of own_sgemm (gemm.c): AVX-512 here, AVX2 in gemm_avx2.c, what both use in
 * gemm_x86.h. Each is compiled for its instruction set with a target attribute, so one binary runs
 * on every x86-64 CPU: gemm.c calls a kernel only after checking, at run time, that the CPU and
 * the OS support it.
 *
 * A call computes one tile of C of rows <= MR and cols <= NR over kc steps of k:
 *   ap: A, element (i, p) at ap[i * arow + p * astride]: packed (arow 1, astride MR), or read in
 *       place (arow 1, astride lda for a transposed A; arow lda, astride 1 for A itself);
 *   bp: B, NR elements per step (only cols of them are read), steps bstride elements apart:
 *       floats (packed, or B read in place), or, for the _bf16 / _f16 variants, the halfs of a
 *       bfloat16 / float16 B read in place, widened to float32 in registers as they are loaded;
 *   c:  (rows, cols) tile of C, row stride ldc; written, or added to when accumulate.
 * Every accumulator stays in a register for the whole k loop: per step, NR / W loads of B,
 * rows broadcasts of A, rows * NR / W fused multiply-adds (W = floats per vector). Each row
 * count has its own compiled body (the row loops unroll to straight code), and partial columns
 * use masked loads and stores, so edge tiles run at full speed with no copies. With arow > 1 the
 * rows of A are reached from four row pointers (rows 0, 3, 6, 9) plus 0, 1 or 2 times arow, which
 * x86 addressing does without extra registers.
 * The B dtype is one more constant parameter of the inlined bodies (BT), so each dtype gets its own
 * compiled copy of the same source. Partial columns of halfs are loaded as whole pairs with a
 * masked 32-bit load (AVX2's vpmaskmovd; 16-bit masked loads would need AVX-512 BW) plus the odd
 * last half on its own, so no byte past the cols elements is read.
 */
#include "gemm_x86.h"

#if defined(__x86_64__) || defined(_M_X64)

int gemm_cpu_has_avx512(void) {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma");
}

/* ---- AVX-512: MR = 12 rows x NR = 32 columns (two 16-float vectors): up to 24 accumulators. ---- */

/* The first n (0..16) of 16 halfs, as a partial load: n / 2 whole pairs, then the odd last half. */
typedef struct {
  __m256i pairs; /* (8) dword lanes loaded */
  __m256i last;  /* (16) the lane of half n - 1 */
  int odd, n;
} part16;

T512 INLINE part16 part16_make(int n) {
  part16 h;
  h.pairs = _mm256_cmpgt_epi32(_mm256_set1_epi32(n >> 1), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  h.last = _mm256_cmpeq_epi16(_mm256_set1_epi16((short)(n - 1)),
                              _mm256_setr_epi16(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
  h.odd = n & 1;
  h.n = n;
  return h;
}

/* 16 floats of B at p (a byte address): floats loaded, bf16 / f16 widened; with full = 0 only the
 * lanes of mask m (floats) or of h (halfs) are read, the others are zero. */
T512 INLINE __m512 load_b16(const int BT, const int full, const char *p, __mmask16 m, const part16 *h) {
  if (BT == DT_F32) return full ? _mm512_loadu_ps((const float *)p) : _mm512_maskz_loadu_ps(m, p);
  __m256i x; /* (16) halfs */
  if (full) {
    x = _mm256_loadu_si256((const __m256i *)p);
  } else {
    x = _mm256_maskload_epi32((const int *)p, h->pairs);
    if (h->odd) x = _mm256_or_si256(x, _mm256_and_si256(h->last, _mm256_set1_epi16(((const short *)p)[h->n - 1])));
  }
  if (BT == DT_BF16) return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(x), 16));
  return _mm512_cvtph_ps(x);
}

T512 INLINE void body512(const int BT, const int R, const int full, const int rows_a, int cols, int64_t kc,
                         const float *ap, int64_t arow, int64_t astride, const void *bp, int64_t bstride, float *c,
                         int64_t ldc, int accumulate) {
  const float *a0 = ap, *a3 = R > 3 ? ap + 3 * arow : ap, *a6 = R > 6 ? ap + 6 * arow : ap,
              *a9 = R > 9 ? ap + 9 * arow : ap; /* row pointers when rows_a */
  const char *bb = (const char *)bp;            /* (1, cols) step p of B, bsb bytes apart */
  const int64_t bsb = bstride * ESZ(BT);
  /* lanes of columns 0-15 and 16-31 that exist */
  const __mmask16 m0 = cols >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << cols) - 1u);
  const __mmask16 m1 = cols >= 32 ? (__mmask16)0xFFFF : cols <= 16 ? 0 : (__mmask16)((1u << (cols - 16)) - 1u);
  const part16 h0 = part16_make(cols >= 16 ? 16 : cols), h1 = part16_make(cols >= 32 ? 16 : cols <= 16 ? 0 : cols - 16);
  __m512 lo[12], hi[12]; /* (R, 32) tile */
#pragma GCC unroll 12
  for (int i = 0; i < 12; i++)
    if (i < R) lo[i] = hi[i] = _mm512_setzero_ps();
  for (int64_t p = 0; p < kc; p++) {
    /* B read in place has its rows far apart (often a page or more): fetch 16 rows ahead */
    _mm_prefetch(bb + 16 * bsb, _MM_HINT_T0);
    _mm_prefetch(bb + 16 * bsb + 16 * ESZ(BT), _MM_HINT_T0);
    /* (1, 32) row p of B */
    const __m512 b0 = load_b16(BT, full, bb, m0, &h0);
    const __m512 b1 = load_b16(BT, full, bb + 16 * ESZ(BT), m1, &h1);
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
    bb += bsb;
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

/* k512_<dtype>_<R>: R rows, B in dtype BT; the four bodies by full width and A in place or packed. */
#define K512_T(R, BT, SUF)                                                                                         \
  T512 static void k512_##SUF##_##R(int cols, int64_t kc, const float *ap, int64_t arow, int64_t astride,           \
                                    const void *bp, int64_t bstride, float *c, int64_t ldc, int accumulate) {       \
    if (arow == 1) {                                                                                                \
      if (cols == 32)                                                                                               \
        body512(BT, R, 1, 0, cols, kc, ap, arow, astride, bp, bstride, c, ldc, accumulate);                         \
      else                                                                                                          \
        body512(BT, R, 0, 0, cols, kc, ap, arow, astride, bp, bstride, c, ldc, accumulate);                         \
    } else if (cols == 32) {                                                                                        \
      body512(BT, R, 1, 1, cols, kc, ap, arow, astride, bp, bstride, c, ldc, accumulate);                           \
    } else {                                                                                                        \
      body512(BT, R, 0, 1, cols, kc, ap, arow, astride, bp, bstride, c, ldc, accumulate);                           \
    }                                                                                                               \
  }
#define K512(R) K512_T(R, DT_F32, f32) K512_T(R, DT_BF16, bf16) K512_T(R, DT_F16, f16)
K512(1) K512(2) K512(3) K512(4) K512(5) K512(6) K512(7) K512(8) K512(9) K512(10) K512(11) K512(12)

#define ROWS12(SUF)                                                                                                 \
  {                                                                                                                 \
    NULL, k512_##SUF##_1, k512_##SUF##_2, k512_##SUF##_3, k512_##SUF##_4, k512_##SUF##_5, k512_##SUF##_6,          \
        k512_##SUF##_7, k512_##SUF##_8, k512_##SUF##_9, k512_##SUF##_10, k512_##SUF##_11, k512_##SUF##_12           \
  }
static const rows_kernel K512_BY_ROWS[3][13] = {ROWS12(f32), ROWS12(bf16), ROWS12(f16)}; /* [DT_*][rows] */

void gemm_ukernel_avx512(int rows, int cols, int64_t kc, const float *ap, int64_t arow, int64_t astride,
                         const void *bp, int64_t bstride, float *c, int64_t ldc, int accumulate) {
  K512_BY_ROWS[DT_F32][rows](cols, kc, ap, arow, astride, bp, bstride, c, ldc, accumulate);
}
void gemm_ukernel_avx512_bf16(int rows, int cols, int64_t kc, const float *ap, int64_t arow, int64_t astride,
                              const void *bp, int64_t bstride, float *c, int64_t ldc, int accumulate) {
  K512_BY_ROWS[DT_BF16][rows](cols, kc, ap, arow, astride, bp, bstride, c, ldc, accumulate);
}
void gemm_ukernel_avx512_f16(int rows, int cols, int64_t kc, const float *ap, int64_t arow, int64_t astride,
                             const void *bp, int64_t bstride, float *c, int64_t ldc, int accumulate) {
  K512_BY_ROWS[DT_F16][rows](cols, kc, ap, arow, astride, bp, bstride, c, ldc, accumulate);
}

/* t (16) += av[0] * B row 0 + ... + av[rows - 1] * B row rows - 1, in that order; B's rows at br,
 * ldbb bytes apart. t is aligned and whole (its lanes past the columns hold zeros, B's are not read). */
T512 INLINE void gemv_fma512(const int BT, const int full, const int rows, const __m512 *av, const char *br,
                             int64_t ldbb, float *t, __mmask16 m, const part16 *h) {
  __m512 s = _mm512_load_ps(t);
  if (rows == 4) /* the next four rows, which the next pass reads: the streams alone keep too few misses in flight */
    for (int r = 4; r < 8; r++) _mm_prefetch(br + r * ldbb, _MM_HINT_T0);
  for (int r = 0; r < rows; r++) s = _mm512_fmadd_ps(av[r], load_b16(BT, full, br + r * ldbb, m, h), s);
  _mm512_store_ps(t, s);
}

/* cc (16, or the lanes of m) = t, or t + cc when add. */
T512 INLINE void gemv_out512(const int full, int add, const float *t, float *cc, __mmask16 m) {
  __m512 s = _mm512_load_ps(t);
  if (add) s = _mm512_add_ps(s, full ? _mm512_loadu_ps(cc) : _mm512_maskz_loadu_ps(m, cc));
  if (full)
    _mm512_storeu_ps(cc, s);
  else
    _mm512_mask_storeu_ps(cc, m, s);
}

#define MASK512(r) ((__mmask16)((1u << (r)) - 1u))

T512 INLINE void gemv512(const int BT, int64_t k, int64_t n, const float *a, int64_t astride, const void *b,
                         int64_t ldb, float *c, int64_t kc, int accumulate) {
  GEMV_BODY(512, BT, __m512, 16, _mm512_setzero_ps(), _mm512_store_ps, _mm512_set1_ps, __mmask16, MASK512, part16,
            part16_make)
}

T512 void gemm_gemv_avx512(int64_t k, int64_t n, const float *a, int64_t astride, const void *b, int64_t ldb,
                           float *c, int64_t kc, int accumulate) {
  gemv512(DT_F32, k, n, a, astride, b, ldb, c, kc, accumulate);
}
T512 void gemm_gemv_avx512_bf16(int64_t k, int64_t n, const float *a, int64_t astride, const void *b, int64_t ldb,
                                float *c, int64_t kc, int accumulate) {
  gemv512(DT_BF16, k, n, a, astride, b, ldb, c, kc, accumulate);
}
T512 void gemm_gemv_avx512_f16(int64_t k, int64_t n, const float *a, int64_t astride, const void *b, int64_t ldb,
                               float *c, int64_t kc, int accumulate) {
  gemv512(DT_F16, k, n, a, astride, b, ldb, c, kc, accumulate);
}

/* ---- Packing a half-precision B not transposed: d (kc, NR) = the (kc, cols) panel at src, rows
 * ldb halfs apart, widened; columns past cols zero (the partial loads give zero lanes). ---- */
T512 INLINE void pack_bn512(const int BT, const int full, const uint16_t *src, int64_t ldb, int64_t kc, int cols,
                            float *d) {
  const __mmask16 m0 = MASK512(cols >= 16 ? 16 : cols), m1 = MASK512(cols >= 32 ? 16 : cols <= 16 ? 0 : cols - 16);
  const part16 h0 = part16_make(cols >= 16 ? 16 : cols), h1 = part16_make(cols >= 32 ? 16 : cols <= 16 ? 0 : cols - 16);
  for (int64_t p = 0; p < kc; p++) {
    const char *r = (const char *)(src + p * ldb); /* (cols) halfs of step p */
    _mm512_storeu_ps(d + p * 32, load_b16(BT, full, r, m0, &h0));
    _mm512_storeu_ps(d + p * 32 + 16, load_b16(BT, full, r + 32, m1, &h1));
  }
}

T512 void gemm_pack_bn_avx512(const uint16_t *src, int b_dtype, int64_t ldb, int64_t kc, int cols, float *d) {
  if (b_dtype == DT_BF16) {
    if (cols == 32)
      pack_bn512(DT_BF16, 1, src, ldb, kc, cols, d);
    else
      pack_bn512(DT_BF16, 0, src, ldb, kc, cols, d);
  } else if (cols == 32) {
    pack_bn512(DT_F16, 1, src, ldb, kc, cols, d);
  } else {
    pack_bn512(DT_F16, 0, src, ldb, kc, cols, d);
  }
}

/* ---- Packing a transposed B for the AVX-512 kernel: d (kc, 32) = the (32, kc) rows of B,
 * ldb elements apart, transposed, 16 x 16 blocks at a time in registers (halfs widened as loaded). ---- */
/* col[q] (16) = element q of the 16 rows at src (ldbb bytes apart): a (16, 16) block transposed. */
T512 INLINE void transpose16_regs(const int BT, const char *src, int64_t ldbb, __m512 *col) {
  __m512 r[16];
  for (int i = 0; i < 16; i++) r[i] = load_b16(BT, 1, src + i * ldbb, 0, NULL); /* (16, 16) block, rows ldbb bytes apart */
  transpose16_vecs(r, col);
}

T512 INLINE void transpose16(const int BT, const char *src, int64_t ldbb, float *dst, int64_t ldd) {
  __m512 col[16];
  transpose16_regs(BT, src, ldbb, col);
  for (int j = 0; j < 16; j++) _mm512_storeu_ps(dst + j * ldd, col[j]);
}

/*
 * One row of A against a transposed B held (n, k), rows ldb elements apart: c (n) (+)= B . a.
 * Lane j of a vector accumulates column j exactly as the micro-kernels do on packed panels (one
 * FMA per step p, in order, from zero in each block of kc steps, each block then added to C), so
 * a row gets the same bits here as in a larger product; the (16, 16) blocks of B are transposed in
 * registers instead of being packed through memory. Steps or columns short of a whole block are
 * read one element at a time.
 */
T512 INLINE void gemvt512(const int BT, int64_t k, int64_t n, const float *a, int64_t astride, const void *b,
                          int64_t ldb, float *c, int64_t kc, int accumulate) {
  const int64_t esz = ESZ(BT), rowb = ldb * esz;
  for (int64_t j0 = 0; j0 < n; j0 += 16) {
    const int cols = n - j0 < 16 ? (int)(n - j0) : 16;
    const __mmask16 mk = cols == 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << cols) - 1u);
    const char *rows = (const char *)b + j0 * rowb; /* row j0 of B, its step 0 */
    __m512 out = _mm512_setzero_ps();
    for (int64_t pc = 0; pc < k; pc += kc) {
      const int64_t pe = pc + kc < k ? pc + kc : k;
      __m512 acc = _mm512_setzero_ps();
      int64_t p = pc;
      if (cols == 16)
        for (; p + 16 <= pe; p += 16) {
          __m512 col[16];
          transpose16_regs(BT, rows + p * esz, rowb, col);
          for (int q = 0; q < 16; q++) acc = _mm512_fmadd_ps(_mm512_set1_ps(a[(p + q) * astride]), col[q], acc);
        }
      for (; p < pe; p++) {
        float t[16] = {0};
        for (int l = 0; l < cols; l++)
          t[l] = BT == DT_F32 ? *(const float *)(rows + l * rowb + p * esz)
                              : gemm_half_to_f32(*(const uint16_t *)(rows + l * rowb + p * esz), BT);
        acc = _mm512_fmadd_ps(_mm512_set1_ps(a[p * astride]), _mm512_loadu_ps(t), acc);
      }
      if (pc == 0)
        out = accumulate ? _mm512_add_ps(acc, _mm512_maskz_loadu_ps(mk, c + j0)) : acc;
      else
        out = _mm512_add_ps(acc, out);
    }
    _mm512_mask_storeu_ps(c + j0, mk, out);
  }
}

T512 void gemm_gemvt_avx512(int64_t k, int64_t n, const float *a, int64_t astride, const void *b, int64_t ldb,
                            float *c, int64_t kc, int accumulate) {
  gemvt512(DT_F32, k, n, a, astride, b, ldb, c, kc, accumulate);
}
T512 void gemm_gemvt_avx512_bf16(int64_t k, int64_t n, const float *a, int64_t astride, const void *b, int64_t ldb,
                                 float *c, int64_t kc, int accumulate) {
  gemvt512(DT_BF16, k, n, a, astride, b, ldb, c, kc, accumulate);
}
T512 void gemm_gemvt_avx512_f16(int64_t k, int64_t n, const float *a, int64_t astride, const void *b, int64_t ldb,
                                float *c, int64_t kc, int accumulate) {
  gemvt512(DT_F16, k, n, a, astride, b, ldb, c, kc, accumulate);
}

T512 INLINE void pack_bt512(const int BT, const void *src, int64_t ldb, int64_t kc, float *d) {
  const char *s = (const char *)src; /* (32, kc) rows ldbb bytes apart */
  const int64_t ldbb = ldb * ESZ(BT);
  int64_t p = 0;
  for (; p + 16 <= kc; p += 16) {
    transpose16(BT, s + p * ESZ(BT), ldbb, d + p * 32, 32);             /* columns 0-15 of the panel */
    transpose16(BT, s + 16 * ldbb + p * ESZ(BT), ldbb, d + p * 32 + 16, 32); /* columns 16-31 */
  }
  for (; p < kc; p++)
    for (int j = 0; j < 32; j++)
      d[p * 32 + j] = BT == DT_F32 ? ((const float *)src)[j * ldb + p]
                                   : gemm_half_to_f32(((const uint16_t *)src)[j * ldb + p], BT);
}

T512 void gemm_pack_bt_avx512(const void *src, int b_dtype, int64_t ldb, int64_t kc, float *d) {
  if (b_dtype == DT_F32)
    pack_bt512(DT_F32, src, ldb, kc, d);
  else if (b_dtype == DT_BF16)
    pack_bt512(DT_BF16, src, ldb, kc, d);
  else
    pack_bt512(DT_F16, src, ldb, kc, d);
}

/* d (kc, 12) = the (rows, kc) rows of A at src (lda floats apart) transposed, rows past `rows`
 * zero: the AVX-512 kernel's packed A panel, 16 steps at a time through registers. */
T512 void gemm_pack_an_avx512(const float *src, int64_t lda, int64_t kc, int rows, float *d) {
  int64_t p = 0;
  for (; p + 16 <= kc; p += 16) {
    __m512 r[16], col[16];
    for (int i = 0; i < 16; i++) r[i] = i < rows ? _mm512_loadu_ps(src + i * lda + p) : _mm512_setzero_ps();
    transpose16_vecs(r, col);
    for (int q = 0; q < 16; q++) _mm512_mask_storeu_ps(d + (p + q) * 12, 0x0FFF, col[q]);
  }
  for (; p < kc; p++) {
    int i = 0;
    for (; i < rows; i++) d[p * 12 + i] = src[i * lda + p];
    for (; i < 12; i++) d[p * 12 + i] = 0.0f;
  }
}

#endif
