/*
 * Products with a bfloat16 B on AVX512_BF16 (VDPBF16PS; AMD Zen 4 and later, Intel Cooper Lake and
 * later; gemm.h): C (m, n) (+)= A (m, k) @ op(B), A float32 rounded to bfloat16 (nearest even, by
 * VCVTNE2PS2BF16, as gemm_amx.c rounds it), B bfloat16, the sums float32. One VDPBF16PS takes 16
 * lanes of k pairs from each operand and adds both products of each pair to the lane's float32 sum:
 * 32 multiply-adds per instruction against the 16 of a float32 FMA, and B is read at 2 bytes an
 * element without being widened.
 *
 * Both operands are held as k pairs (two bf16 in a 32-bit lane, the even step low):
 *   A is rounded once per call into panels of MR rows, (k2, MR) pairs each (k2 = k / 2 rounded up);
 *   B is packed a (kc, NR) panel at a time into (kc / 2, NR) pairs: rows p and p + 1 of B (k, n)
 *   interleaved by one permute, or, for B held (n, k) (trans_b, the backward's dx = dy . wᵀ), 16
 *   rows of pairs transposed in registers. A k past the end is a zero pair in both.
 * The micro-kernel keeps a (12, 32) tile of C in 24 registers over kc / 2 pair steps, as the float32
 * AVX-512 kernel does over kc steps. The blocking is BLIS's: per thread (its share of columns), a
 * (kc, nc) block of B packed into L2, used by every row panel of A, a (kc, 32) panel of it staying
 * in L1 across an (mc, kc) block of A.
 *
 * One row of A with B not transposed (a decode step of batch 1) reads B's rows in place, whole and
 * in order (gemv_dot), pairing rows p and p + 1 in registers. Every element of C is formed by the
 * same sequence of operations on every path: from zero at each block of KC steps, one VDPBF16PS per
 * pair in order of k, each block's sum then added to C; so a row gets the same bits alone as in a
 * batch.
 */
#define _POSIX_C_SOURCE 200112L
#include "gemm_x86.h"

#include "parallel.h"
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(_M_X64)

#define TDOT __attribute__((target("avx512f,fma,avx512bw,avx512vl,avx512bf16")))

enum { MR = 12, NR = 32 };           /* tile of C per micro-kernel call */
enum { KC = 256, NC = 512, MC = 384 }; /* k steps per block (even), columns of B per packed block, rows of A per block */
enum { AHEAD = 8 };                  /* rows of B prefetched ahead while packing */
enum { DOT_CHUNK = 2048 };           /* columns of C per pass of the one-row product (kept in L1) */
/* Below this many multiply-adds per thread a helper costs more than it saves. */
#define MIN_MACS_PER_THREAD ((double)(1 << 19))

int gemm_cpu_has_avx512_bf16(void) {
  __builtin_cpu_init();
  return gemm_cpu_has_avx512() && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
         __builtin_cpu_supports("avx512bf16");
}

/* ---- A: rounded to bfloat16, as pairs. ---- */

/* dst (ceil(k / 2)) = the k floats at src rounded to bf16, as pairs; an odd last pair has a zero high half. */
TDOT static void round_row(const float *src, int64_t k, uint32_t *dst) {
  for (int64_t p = 0; p < k; p += 32) {
    const int64_t left = k - p, pairs = left >= 32 ? 16 : (left + 1) / 2;
    const __mmask16 m0 = left >= 16 ? 0xffff : (__mmask16)((1u << left) - 1);
    const __mmask16 m1 = left >= 32 ? 0xffff : left > 16 ? (__mmask16)((1u << (left - 16)) - 1) : 0;
    const __m512 lo = _mm512_maskz_loadu_ps(m0, src + p), hi = _mm512_maskz_loadu_ps(m1, src + p + 16);
    const __m512i h = (__m512i)_mm512_cvtne2ps_pbh(hi, lo); /* halfs p..p+31 in order: pairs (p, p+1), ... */
    _mm512_mask_storeu_epi32(dst + p / 2, (__mmask16)((1u << pairs) - 1), h);
  }
}

/* Panel ip of the rounded A: d (k2, MR) = pairs of rows 12 ip .. of A (lda floats apart), rows past m
 * zero; row holds one row's pairs on their way (k2). */
static void pack_a_panel(const float *a, int64_t lda, int64_t m, int64_t k, int64_t ip, uint32_t *row, uint32_t *d) {
  const int64_t k2 = (k + 1) / 2;
  for (int i = 0; i < MR; i++) {
    const int64_t r = ip * MR + i;
    if (r < m)
      round_row(a + r * lda, k, row);
    else
      memset(row, 0, (size_t)k2 * 4);
    for (int64_t q = 0; q < k2; q++) d[q * MR + i] = row[q];
  }
}

/* ---- B: packed as pairs. ---- */

/* Permute indices pairing 16-bit lanes of two rows: (r0[j], r1[j]) for columns 0-15, then 16-31. */
TDOT INLINE __m512i pair_index(int half) {
  short idx[32];
  for (int j = 0; j < 16; j++) {
    idx[2 * j] = (short)(16 * half + j);
    idx[2 * j + 1] = (short)(32 + 16 * half + j);
  }
  return _mm512_loadu_si512((const void *)idx);
}

/* Mask of the first n (0..32) of 32 columns. */
static inline __mmask32 mask32(int64_t n) { return n >= 32 ? 0xffffffffu : (__mmask32)((1u << n) - 1); }

/* v0, v1 (16 pairs each) = columns 0-15 and 16-31 of rows r0, r1 (32 bf16 each) as pairs. */
TDOT INLINE void pair_rows(__m512i r0, __m512i r1, __m512i i0, __m512i i1, __m512i *v0, __m512i *v1) {
  *v0 = _mm512_permutex2var_epi16(r0, i0, r1);
  *v1 = _mm512_permutex2var_epi16(r0, i1, r1);
}

/* B (k, n) not transposed: P = the (kc, w) block at row p0, column j0 (rows ldb apart) as panels of
 * (kc2, 32) pairs, panel s for columns 32 s..; zero past k and w. Each pair of rows is read w columns
 * at a time, front to back. */
TDOT static void pack_bn(const uint16_t *b, int64_t ldb, int64_t k, int64_t p0, int64_t kc, int64_t j0, int64_t w,
                         uint32_t *P) {
  const __m512i i0 = pair_index(0), i1 = pair_index(1);
  const int64_t kc2 = (kc + 1) / 2;
  for (int64_t q = 0; q < kc2; q++) {
    const int64_t p = p0 + 2 * q;
    const uint16_t *b0 = b + p * ldb + j0, *b1 = b0 + ldb;
    if (p + AHEAD + 1 < k) /* a row's few hundred bytes are too short for the hardware prefetcher */
      for (int64_t x = 0; x < w; x += 32) {
        _mm_prefetch((const char *)(b0 + AHEAD * ldb + x), _MM_HINT_T0);
        _mm_prefetch((const char *)(b1 + AHEAD * ldb + x), _MM_HINT_T0);
      }
    for (int64_t s = 0; s * NR < w; s++) {
      const int64_t cols = w - s * NR;
      const __mmask32 mask = cols >= 32 ? 0xffffffffu : (__mmask32)((1u << cols) - 1);
      const __m512i r0 = _mm512_maskz_loadu_epi16(mask, b0 + s * NR);
      const __m512i r1 = p + 1 < k ? _mm512_maskz_loadu_epi16(mask, b1 + s * NR) : _mm512_setzero_si512();
      __m512i v0, v1;
      pair_rows(r0, r1, i0, i1, &v0, &v1);
      uint32_t *d = P + s * kc2 * NR + q * NR;
      _mm512_storeu_si512((void *)d, v0);
      _mm512_storeu_si512((void *)(d + 16), v1);
    }
  }
}

/* Pair q of row j of B held (n, k) (pairs from step p0), zero past k. */
static uint32_t pair_at(const uint16_t *row, int64_t k, int64_t p0, int64_t q) {
  const int64_t p = p0 + 2 * q;
  const uint32_t lo = p < k ? row[p] : 0, hi = p + 1 < k ? row[p + 1] : 0;
  return lo | hi << 16;
}

/* B held (n, k) (trans_b): d (kc2, 32) = pairs of the rows j0.. (w <= 32 of them, ldb apart) from
 * step p0, transposed: 16 rows x 16 pairs at a time in registers, the rest one pair at a time;
 * rows past w and steps past k zero. */
TDOT static void pack_bt_panel(const uint16_t *b, int64_t ldb, int64_t k, int64_t p0, int64_t kc, int64_t j0,
                               int64_t w, uint32_t *d) {
  const int64_t kc2 = (kc + 1) / 2;
  int64_t q = 0;
  if (w == NR) /* whole blocks: 32 steps of 16 rows, all inside B */
    for (; 2 * q + 32 <= kc; q += 16)
      for (int h = 0; h < 2; h++) {
        __m512 r[16], col[16];
        for (int i = 0; i < 16; i++) r[i] = _mm512_loadu_ps((const void *)(b + (j0 + 16 * h + i) * ldb + p0 + 2 * q));
        transpose16_vecs(r, col);
        for (int x = 0; x < 16; x++) _mm512_storeu_ps((void *)(d + (q + x) * NR + 16 * h), col[x]);
      }
  for (; q < kc2; q++)
    for (int64_t j = 0; j < NR; j++) d[q * NR + j] = j < w ? pair_at(b + (j0 + j) * ldb, k, p0, q) : 0;
}

/* ---- The micro-kernel: c (rows, cols) (+)= A panel (kc2, 12) . B panel (kc2, 32), over pairs. ---- */

#define BH(x) ((__m512bh)(x))

/* B's pair step q for the micro-kernel: b0, b1 (16 pairs each) from the packed panel bp, or, with
 * DIRECT, rows 2q and 2q + 1 of B read in place at bp (rows ldb apart, cols of them; the second zero
 * past kc) and paired in registers, the rows 16 on prefetched. */
TDOT INLINE void dot_b(const int DIRECT, const uint32_t *bp, int64_t q, int64_t kc, int64_t ldb, __mmask32 mask,
                       __m512i i0, __m512i i1, __m512i *b0, __m512i *b1) {
  if (!DIRECT) {
    *b0 = _mm512_loadu_si512((const void *)(bp + q * NR));
    *b1 = _mm512_loadu_si512((const void *)(bp + q * NR + 16));
    return;
  }
  const uint16_t *r = (const uint16_t *)bp + 2 * q * ldb;
  _mm_prefetch((const char *)(r + 16 * ldb), _MM_HINT_T0);
  _mm_prefetch((const char *)(r + 17 * ldb), _MM_HINT_T0);
  const __m512i r0 = _mm512_maskz_loadu_epi16(mask, r);
  const __m512i r1 = 2 * q + 1 < kc ? _mm512_maskz_loadu_epi16(mask, r + ldb) : _mm512_setzero_si512();
  pair_rows(r0, r1, i0, i1, b0, b1);
}

TDOT INLINE void dot_body(const int R, const int DIRECT, int cols, int64_t kc, const uint32_t *ap, const uint32_t *bp,
                          int64_t ldb, float *c, int64_t ldc, int accumulate) {
  const int64_t kc2 = (kc + 1) / 2;
  const __m512i i0 = DIRECT ? pair_index(0) : _mm512_setzero_si512(), i1 = DIRECT ? pair_index(1) : i0;
  const __mmask32 bmask = mask32(cols);
  __m512 lo[MR], hi[MR];
#pragma GCC unroll 12
  for (int i = 0; i < MR; i++)
    if (i < R) lo[i] = hi[i] = _mm512_setzero_ps();
  for (int64_t q = 0; q < kc2; q++) {
    __m512i b0, b1;
    dot_b(DIRECT, bp, q, kc, ldb, bmask, i0, i1, &b0, &b1);
#pragma GCC unroll 12
    for (int i = 0; i < MR; i++) {
      if (i < R) {
        const __m512i a = _mm512_set1_epi32((int)ap[q * MR + i]);
        lo[i] = _mm512_dpbf16_ps(lo[i], BH(a), BH(b0));
        hi[i] = _mm512_dpbf16_ps(hi[i], BH(a), BH(b1));
      }
    }
  }
  const __mmask16 m0 = cols >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << cols) - 1u);
  const __mmask16 m1 = cols >= 32 ? (__mmask16)0xffff : cols <= 16 ? 0 : (__mmask16)((1u << (cols - 16)) - 1u);
#pragma GCC unroll 12
  for (int i = 0; i < MR; i++) {
    if (i < R) {
      float *r = c + i * ldc;
      if (accumulate) {
        lo[i] = _mm512_add_ps(lo[i], _mm512_maskz_loadu_ps(m0, r));
        hi[i] = _mm512_add_ps(hi[i], _mm512_maskz_loadu_ps(m1, r + 16));
      }
      _mm512_mask_storeu_ps(r, m0, lo[i]);
      _mm512_mask_storeu_ps(r + 16, m1, hi[i]);
    }
  }
}

/* c (rows, cols) (+)= A panel (kc, 12) . B (kc, 32) over kc steps (kc / 2 pairs, rounded up): B a packed
 * panel (ldb unused), or, for the _direct kernels, B itself read in place, rows ldb apart. */
typedef void (*dot_kernel)(int cols, int64_t kc, const uint32_t *ap, const uint32_t *bp, int64_t ldb, float *c,
                           int64_t ldc, int accumulate);

#define DOT_K(R)                                                                                                    \
  TDOT static void dot_##R(int cols, int64_t kc, const uint32_t *ap, const uint32_t *bp, int64_t ldb, float *c,     \
                           int64_t ldc, int accumulate) {                                                           \
    dot_body(R, 0, cols, kc, ap, bp, ldb, c, ldc, accumulate);                                                      \
  }                                                                                                                 \
  TDOT static void dot_direct_##R(int cols, int64_t kc, const uint32_t *ap, const uint32_t *bp, int64_t ldb,        \
                                  float *c, int64_t ldc, int accumulate) {                                          \
    dot_body(R, 1, cols, kc, ap, bp, ldb, c, ldc, accumulate);                                                      \
  }
DOT_K(1) DOT_K(2) DOT_K(3) DOT_K(4) DOT_K(5) DOT_K(6) DOT_K(7) DOT_K(8) DOT_K(9) DOT_K(10) DOT_K(11) DOT_K(12)
static const dot_kernel DOT_BY_ROWS[2][MR + 1] = {
    {NULL, dot_1, dot_2, dot_3, dot_4, dot_5, dot_6, dot_7, dot_8, dot_9, dot_10, dot_11, dot_12},
    {NULL, dot_direct_1, dot_direct_2, dot_direct_3, dot_direct_4, dot_direct_5, dot_direct_6, dot_direct_7,
     dot_direct_8, dot_direct_9, dot_direct_10, dot_direct_11, dot_direct_12}}; /* [direct][rows] */

/* ---- One row of A, B not transposed: c (n) (+)= a2 . B, B's rows read whole, in place. ---- */

/* t (32) += av[x] . pair x of B's rows at br (ldb apart; rows 2x, 2x + 1) for x < NP, in order; the
 * columns of mask only (the others read as zero). With odd, the last pair's second row is past k: zero. */
TDOT INLINE void gemv_pairs(const int NP, const int odd, const __m512i *av, const uint16_t *br, int64_t ldb,
                            __mmask32 mask, __m512i i0, __m512i i1, float *t) {
  __m512 s0 = _mm512_load_ps(t), s1 = _mm512_load_ps(t + 16);
  for (int x = 0; x < NP; x++) {
    const uint16_t *r = br + 2 * x * ldb;
    const __m512i r0 = _mm512_maskz_loadu_epi16(mask, r);
    const __m512i r1 = odd && x == NP - 1 ? _mm512_setzero_si512() : _mm512_maskz_loadu_epi16(mask, r + ldb);
    __m512i v0, v1;
    pair_rows(r0, r1, i0, i1, &v0, &v1);
    s0 = _mm512_dpbf16_ps(s0, BH(av[x]), BH(v0));
    s1 = _mm512_dpbf16_ps(s1, BH(av[x]), BH(v1));
  }
  _mm512_store_ps(t, s0);
  _mm512_store_ps(t + 16, s1);
}

/* t (cols, in groups of 32) += the pairs of rows [p, p + 2 NP) of B (the last one alone when odd):
 * a pass over t, each group of columns read from NP pairs of rows. Whole groups first, then the last,
 * partial one; the rows of the next pass are prefetched. */
TDOT INLINE void gemv_pass(const int NP, const int odd, const uint32_t *a2, int64_t p, const uint16_t *br, int64_t ldb,
                           int64_t cols, int prefetch, __m512i i0, __m512i i1, float *t) {
  __m512i av[4];
  for (int x = 0; x < NP; x++) av[x] = _mm512_set1_epi32((int)a2[p / 2 + x]);
  const int64_t whole = cols / 32;
  for (int64_t g = 0; g < whole; g++) {
    if (prefetch)
      for (int r = 0; r < 2 * NP; r++) _mm_prefetch((const char *)(br + (2 * NP + r) * ldb + 32 * g), _MM_HINT_T0);
    gemv_pairs(NP, odd, av, br + 32 * g, ldb, 0xffffffffu, i0, i1, t + 32 * g);
  }
  if (whole * 32 < cols) gemv_pairs(NP, odd, av, br + 32 * whole, ldb, mask32(cols - 32 * whole), i0, i1, t + 32 * whole);
}

/* Lane order of a sum vector -> c: (16, or the lanes of m) = t, or t + c when add. */
TDOT INLINE void gemv_out(const float *t, float *c, int64_t left, int add) {
  const __mmask16 m = left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1u);
  __m512 s = _mm512_load_ps(t);
  if (add) s = _mm512_add_ps(s, _mm512_maskz_loadu_ps(m, c));
  _mm512_mask_storeu_ps(c, m, s);
}

/* The columns [0, n) of C for one row: pairs a2 (ceil(k / 2)), B (k, n) rows ldb apart. Within each
 * block of KC steps, t starts at zero and takes one VDPBF16PS per pair in order (four pairs per pass
 * over t, then one at a time); then C = t (+ C), or C = t + C for later blocks: the micro-kernel's
 * operations. */
TDOT static void gemv_dot(int64_t k, int64_t n, const uint32_t *a2, const uint16_t *b, int64_t ldb, float *c,
                          int accumulate) {
  const __m512i i0 = pair_index(0), i1 = pair_index(1);
  float t[DOT_CHUNK] __attribute__((aligned(64)));
  for (int64_t j0 = 0; j0 < n; j0 += DOT_CHUNK) {
    const int64_t cols = n - j0 < DOT_CHUNK ? n - j0 : DOT_CHUNK, groups = (cols + 31) / 32;
    for (int64_t pc = 0; pc < k; pc += KC) {
      const int64_t pend = k - pc < KC ? k : pc + KC;
      memset(t, 0, (size_t)groups * 32 * sizeof(float));
      int64_t p = pc;
      for (; p + 4 <= pend; p += 4) gemv_pass(2, 0, a2, p, b + p * ldb + j0, ldb, cols, p + 8 <= k, i0, i1, t);
      for (; p + 2 <= pend; p += 2) gemv_pass(1, 0, a2, p, b + p * ldb + j0, ldb, cols, 0, i0, i1, t);
      if (p < pend) gemv_pass(1, 1, a2, p, b + p * ldb + j0, ldb, cols, 0, i0, i1, t);
      const int add = pc > 0 || accumulate;
      for (int64_t x = 0; x < cols; x += 16) gemv_out(t + x, c + j0 + x, cols - x, add);
    }
  }
}

/* ---- One row of A, B transposed (held (n, k)): c (n) (+)= B . a2, 16 rows of B per vector. ---- */

/* acc[g] += the pairs [q, q + 16) of rows 16 g .. 16 g + 15 at rows (ldb apart), for g < G, each
 * lane its row's pairs in order: 16 rows x 16 pairs transposed in registers, then 16 VDPBF16PS. */
TDOT INLINE void gemvt_block(const int G, const uint32_t *a2, int64_t q, const uint16_t *rows, int64_t ldb,
                             int64_t p0, __m512 *acc) {
  for (int g = 0; g < G; g++) {
    __m512 r[16], col[16];
    for (int i = 0; i < 16; i++) {
      const uint16_t *row = rows + (16 * g + i) * ldb + p0 + 2 * q;
      _mm_prefetch((const char *)(row + 64), _MM_HINT_T0); /* two blocks on: 64 row streams are too many for the hardware */
      r[i] = _mm512_loadu_ps((const void *)row);
    }
    transpose16_vecs(r, col);
    for (int x = 0; x < 16; x++)
      acc[g] = _mm512_dpbf16_ps(acc[g], BH(_mm512_set1_epi32((int)a2[p0 / 2 + q + x])), BH(_mm512_castps_si512(col[x])));
  }
}

/* Rows [j0, j0 + 16 G) of B (all inside it), or, with G = 0, the w < 16 rows from j0: their sums with a2
 * in blocks of KC steps as dot_body forms them, into c + j0. Pairs short of a whole block of 16 (and
 * every pair with G = 0) are gathered one at a time. */
TDOT INLINE void gemvt_rows(const int G, int64_t w, int64_t k, const uint32_t *a2, const uint16_t *b, int64_t ldb,
                            int64_t j0, float *c, int accumulate) {
  const int NV = G ? G : 1;
  const uint16_t *rows = b + j0 * ldb;
  __m512 out[4];
  for (int64_t pc = 0; pc < k; pc += KC) {
    const int64_t kc = k - pc < KC ? k - pc : KC, kc2 = (kc + 1) / 2;
    __m512 acc[4];
    for (int g = 0; g < NV; g++) acc[g] = _mm512_setzero_ps();
    int64_t q = 0;
    if (G)
      for (; 2 * q + 32 <= kc; q += 16) gemvt_block(G, a2, q, rows, ldb, pc, acc);
    for (; q < kc2; q++)
      for (int g = 0; g < NV; g++) {
        uint32_t t[16] __attribute__((aligned(64)));
        for (int l = 0; l < 16; l++) t[l] = G || l < w ? pair_at(rows + (16 * g + l) * ldb, k, pc, q) : 0;
        acc[g] = _mm512_dpbf16_ps(acc[g], BH(_mm512_set1_epi32((int)a2[pc / 2 + q])), BH(_mm512_load_si512(t)));
      }
    for (int g = 0; g < NV; g++) {
      const __mmask16 m = G || w >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << w) - 1u);
      if (pc > 0)
        out[g] = _mm512_add_ps(acc[g], out[g]);
      else
        out[g] = accumulate ? _mm512_add_ps(acc[g], _mm512_maskz_loadu_ps(m, c + j0 + 16 * g)) : acc[g];
    }
  }
  for (int g = 0; g < NV; g++)
    _mm512_mask_storeu_ps(c + j0 + 16 * g, G || w >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << w) - 1u), out[g]);
}

/* c (n) (+)= B . a2 for B held (n, k): 64 rows at a time (four independent chains of sums), then 16,
 * then the last few. */
TDOT static void gemvt_dot(int64_t k, int64_t n, const uint32_t *a2, const uint16_t *b, int64_t ldb, float *c,
                           int accumulate) {
  int64_t j = 0;
  for (; j + 64 <= n; j += 64) gemvt_rows(4, 64, k, a2, b, ldb, j, c, accumulate);
  for (; j + 16 <= n; j += 16) gemvt_rows(1, 16, k, a2, b, ldb, j, c, accumulate);
  if (j < n) gemvt_rows(0, n - j, k, a2, b, ldb, j, c, accumulate);
}

/* ---- The driver. ---- */

typedef struct {
  int trans_b, accumulate;
  int64_t m, n, k, k2, lda, ldb, ldc;
  const float *a;
  uint32_t *apack; /* (panels, k2, MR) the rounded A; for one row, its (k2) pairs */
  const uint16_t *b;
  float *c;
  int64_t per;      /* columns of C per task (a multiple of NR), or row panels per task when rounding */
  char *work;       /* per task: task_bytes of its own */
  size_t task_bytes;
} dot_job;

/* Task i rounds its share of A's row panels (and takes the first of its buffer for a row on its way). */
static void run_round(void *arg, int i) {
  const dot_job *j = (const dot_job *)arg;
  const int64_t panels = (j->m + MR - 1) / MR, lo = i * j->per, hi = lo + j->per < panels ? lo + j->per : panels;
  uint32_t *row = (uint32_t *)(j->work + (size_t)i * j->task_bytes);
  for (int64_t ip = lo; ip < hi; ip++) pack_a_panel(j->a, j->lda, j->m, j->k, ip, row, j->apack + ip * j->k2 * MR);
}

/* (kc, w) block of op(B) at step pc, column jc -> panels of (kc2, 32) pairs. */
static void pack_b_block(const dot_job *j, int64_t pc, int64_t kc, int64_t jc, int64_t w, uint32_t *P) {
  if (!j->trans_b) {
    pack_bn(j->b, j->ldb, j->k, pc, kc, jc, w, P);
    return;
  }
  const int64_t kc2 = (kc + 1) / 2;
  for (int64_t s = 0; s * NR < w; s++)
    pack_bt_panel(j->b, j->ldb, j->k, pc, kc, jc + s * NR, w - s * NR < NR ? w - s * NR : NR, P + s * kc2 * NR);
}

/* Up to how many rows of A B (not transposed) is read in place rather than packed: packing costs a
 * pass over B of its own, which few rows do not repay (the same threshold as gemm.c's). */
#define DIRECT_ROWS (4 * MR)

/* Columns [lo, hi) of C: for each (kc, nc) block of B, packed once (or, with few rows, read in place),
 * every (mc, kc) block of A. */
static void dot_part(const dot_job *j, int64_t lo, int64_t hi, uint32_t *P) {
  const int direct = !j->trans_b && j->m <= DIRECT_ROWS;
  for (int64_t jc = lo; jc < hi; jc += NC) {
    const int64_t nc = hi - jc < NC ? hi - jc : NC;
    for (int64_t pc = 0; pc < j->k; pc += KC) {
      const int64_t kc = j->k - pc < KC ? j->k - pc : KC, kc2 = (kc + 1) / 2;
      const int accumulate = pc > 0 || j->accumulate;
      if (!direct) pack_b_block(j, pc, kc, jc, nc, P);
      for (int64_t ic = 0; ic < j->m; ic += MC) {
        const int64_t mc = j->m - ic < MC ? j->m - ic : MC;
        for (int64_t jr = 0; jr < nc; jr += NR) {
          const int cols = (int)(nc - jr < NR ? nc - jr : NR);
          const uint32_t *bp = direct ? (const uint32_t *)(j->b + pc * j->ldb + jc + jr) : P + (jr / NR) * kc2 * NR;
          for (int64_t ir = 0; ir < mc; ir += MR) {
            const int rows = (int)(mc - ir < MR ? mc - ir : MR);
            const uint32_t *ap = j->apack + ((ic + ir) / MR) * j->k2 * MR + (pc / 2) * MR;
            DOT_BY_ROWS[direct][rows](cols, kc, ap, bp, j->ldb, j->c + (ic + ir) * j->ldc + jc + jr, j->ldc, accumulate);
          }
        }
      }
    }
  }
}

static void run_part(void *arg, int i) {
  const dot_job *j = (const dot_job *)arg;
  const int64_t lo = i * j->per, hi = lo + j->per < j->n ? lo + j->per : j->n;
  if (lo < hi) dot_part(j, lo, hi, (uint32_t *)(j->work + (size_t)i * j->task_bytes));
}

static void run_gemv(void *arg, int i) {
  const dot_job *j = (const dot_job *)arg;
  const int64_t lo = i * j->per, hi = lo + j->per < j->n ? lo + j->per : j->n;
  if (lo >= hi) return;
  if (j->trans_b)
    gemvt_dot(j->k, hi - lo, j->apack, j->b + lo * j->ldb, j->ldb, j->c + lo, j->accumulate);
  else
    gemv_dot(j->k, hi - lo, j->apack, j->b + lo, j->ldb, j->c + lo, j->accumulate);
}

/* One thread's buffers, kept between calls. */
typedef struct {
  void *p;
  size_t len;
} buf;
static __thread buf shared_a, work;

static void *grow(buf *b, size_t bytes) {
  if (b->len >= bytes) return b->p;
  free(b->p);
  b->p = NULL;
  b->len = 0;
  if (posix_memalign(&b->p, 64, bytes) != 0) return NULL;
  b->len = bytes;
  return b->p;
}

/* Threads for macs multiply-adds split in units: no more than units, none with too little work. */
static int threads_for(int threads, double macs, int64_t units) {
  if (threads > MAX_POOL_TASKS) threads = MAX_POOL_TASKS;
  if (threads > units) threads = (int)units;
  if (threads > 1 && macs / threads < MIN_MACS_PER_THREAD) threads = (int)(macs / MIN_MACS_PER_THREAD);
  return threads < 1 ? 1 : threads;
}

int gemm_dot_bf16(int trans_b, int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const uint16_t *b,
                  int64_t ldb, float *c, int64_t ldc, int accumulate, int threads) {
  const int64_t k2 = (k + 1) / 2, panels = (m + MR - 1) / MR;
  const double macs = (double)m * (double)n * (double)k;
  dot_job j = {trans_b, accumulate, m, n, k, k2, lda, ldb, ldc, a, NULL, b, c, 0, NULL, 0};
  if (m == 1) { /* one row: its pairs, then B in place, the columns split in runs of 64 */
    j.apack = (uint32_t *)grow(&shared_a, (size_t)k2 * 4);
    if (!j.apack) return 0;
    round_row(a, k, j.apack);
    const int t = threads_for(threads, macs, (n + 63) / 64);
    j.per = ((n + t - 1) / t + 63) / 64 * 64;
    run_tasks(t, run_gemv, &j);
    return 1;
  }
  const int t = threads_for(threads, macs, (n + NR - 1) / NR);
  const size_t block_bytes = (size_t)((KC / 2) * NC * 4); /* a packed (KC, NC) block of B */
  const size_t task_bytes = block_bytes > (size_t)k2 * 4 ? block_bytes : (size_t)k2 * 4;
  /* every buffer is taken here, before any task starts: a failure leaves C untouched */
  j.apack = (uint32_t *)grow(&shared_a, (size_t)(panels * k2 * MR) * 4);
  j.work = (char *)grow(&work, task_bytes * (size_t)t);
  if (!j.apack || !j.work) return 0;
  j.task_bytes = task_bytes;
  const int tr = threads_for(t, (double)m * (double)k * 8, panels); /* rounding A: a pass over it */
  j.per = (panels + tr - 1) / tr;
  run_tasks(tr, run_round, &j);
  j.per = ((n + NR - 1) / NR + t - 1) / t * NR;
  run_tasks(t, run_part, &j);
  return 1;
}

#else

int gemm_cpu_has_avx512_bf16(void) { return 0; }
int gemm_dot_bf16(int trans_b, int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const uint16_t *b,
                  int64_t ldb, float *c, int64_t ldc, int accumulate, int threads) {
  (void)trans_b, (void)m, (void)n, (void)k, (void)a, (void)lda, (void)b, (void)ldb, (void)c, (void)ldc;
  (void)accumulate, (void)threads;
  return 0;
}

#endif
