/*
 * Products with a bfloat16 B on the CPU's AMX tile units (Intel Sapphire Rapids and later; gemm.h):
 * C (m, n) (+)= A (m, k) @ op(B), A float32 rounded to bfloat16 (nearest even), B bfloat16, the
 * sums float32 (TDPBF16PS: each step adds the two products of a k pair to the float32 sum).
 *
 * A tile holds 16 rows of 64 bytes. TDPBF16PS multiplies a (16, 32) bf16 tile by a (32, 16) one
 * given as 16 rows of 16 k pairs ("VNNI" order) into a (16, 16) float32 tile. A block of C keeps
 * four sums (32 x 32) in tiles 4..7, fed by tiles 0, 1 (left operand) and 2, 3 (right operand),
 * 32 k steps at a time:
 *
 *   B not transposed (a weight held (in, out)):  C block = A rows (left) . B panel (right)
 *     A is rounded into a16 (rows padded to 16 or 32, k to 32, zeros), read by tile loads; B is
 *     reordered into k pairs (pack_panel) a (PANEL_K, PANEL_COLS) panel at a time, used by every
 *     block of rows, the sums kept in cbuf between panels (a last block of 16 rows takes half).
 *   B transposed (held (n, k), as the backward's dx = dy . wᵀ reads a weight):
 *                                                Cᵀ block = B rows (left) . A pairs (right)
 *     the rows of B are read by tile loads in place (no packing), A is rounded and reordered into
 *     k pairs once (pair_rows), and each block of Cᵀ is transposed on its way out.
 *
 * Every element of C is the same sequence of steps over k whatever else is in its block, and
 * padding adds exact zeros: a row of A gets the same bits alone as in a batch.
 */
#define _GNU_SOURCE
#include "gemm.h"

#include "parallel.h"
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && defined(__linux__)
#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#define TAMX __attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw,avx512vl,avx512bf16")))

enum { ROWS = 32, COLS = 32, KSTEP = 32 }; /* C block, k per tile step */
/* B not transposed: columns and k rows of B per packed panel, rows of A per group */
enum { PANEL_COLS = 256, PANEL_K = 256, GROUP_ROWS = 256 };
enum { AHEAD = 4 }; /* pairs of rows of B prefetched ahead while packing */
#define PANEL_BYTES ((size_t)PANEL_COLS * PANEL_K * 2)

/* Rounds up to a multiple of r. */
static int64_t up(int64_t x, int64_t r) { return (x + r - 1) / r * r; }

static int amx_state = -1; /* unknown, 0 no, 1 yes */

/* AMX-TILE, AMX-BF16 and AVX512-BF16 in the CPU, and Linux's permission to use the tile state. */
int gemm_amx_available(void) {
  if (amx_state >= 0) return amx_state;
  unsigned a = 0, b = 0, c = 0, d = 0, a1 = 0, b1 = 0, c1 = 0, d1 = 0;
  int ok = __get_cpuid_count(7, 0, &a, &b, &c, &d) && __get_cpuid_count(7, 1, &a1, &b1, &c1, &d1);
  ok = ok && (d >> 22 & 1) && (d >> 24 & 1) && (a1 >> 5 & 1) && (b >> 16 & 1) && (b >> 30 & 1);
  /* ARCH_REQ_XCOMP_PERM (0x1023) for XFEATURE_XTILEDATA (18): once per process, for every thread */
  if (ok) ok = syscall(SYS_arch_prctl, 0x1023, 18) == 0;
  amx_state = ok;
  return ok;
}

typedef struct {
  uint8_t palette, start_row, reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
} tile_config;

/* Every tile 16 rows of 64 bytes. */
TAMX static void tiles_on(void) {
  tile_config cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.palette = 1;
  for (int t = 0; t < 8; t++) {
    cfg.rows[t] = 16;
    cfg.colsb[t] = 64;
  }
  _tile_loadconfig(&cfg);
}

/* dst (rows16, k32) = src (m, k) (row stride lda) rounded to bf16, zero-padded. */
TAMX static void round_rows(const float *src, int64_t lda, int64_t m, int64_t k, int64_t rows, int64_t k32,
                            uint16_t *dst) {
  for (int64_t i = 0; i < rows; i++) {
    uint16_t *d = dst + i * k32;
    if (i >= m) {
      memset(d, 0, (size_t)k32 * 2);
      continue;
    }
    const float *s = src + i * lda;
    for (int64_t p = 0; p < k32; p += 32) {
      const int64_t left = k - p;
      const __mmask16 m0 = left >= 16 ? 0xffff : left > 0 ? (__mmask16)((1u << left) - 1) : 0;
      const __mmask16 m1 = left >= 32 ? 0xffff : left > 16 ? (__mmask16)((1u << (left - 16)) - 1) : 0;
      const __m512 lo = _mm512_maskz_loadu_ps(m0, s + p), hi = _mm512_maskz_loadu_ps(m1, s + p + 16);
      _mm512_storeu_si512((void *)(d + p), (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
    }
  }
}

/* For B not transposed: P = rows [k0, k0 + kb) of the w columns of B at column j0 (rows ldb
 * apart) as k pairs, two right-hand tiles per 32 columns (sub-panel s):
 * P[s][t][q][c] = (B[k0 + 2q][j], B[k0 + 2q + 1][j]) with j = j0 + 32s + 16t + c, zero past k and w.
 * Each pair of rows is read w columns at a time, front to back. */
TAMX static void pack_panel(const uint16_t *b, int64_t ldb, int64_t k, int64_t k0, int64_t kb, int64_t j0, int64_t w,
                            uint32_t *P) {
  const __m512i first = _mm512_set_epi64(11, 10, 3, 2, 9, 8, 1, 0), second = _mm512_set_epi64(15, 14, 7, 6, 13, 12, 5, 4);
  const int64_t k2 = kb / 2;
  for (int64_t q = 0; q < k2; q++) {
    const int64_t p = k0 + 2 * q;
    const uint16_t *b0 = b + p * ldb + j0, *b1 = b0 + ldb;
    if (p + 2 * AHEAD + 1 < k) /* the rows AHEAD pairs on: a row's few hundred bytes are too short for the hardware */
      for (int64_t x = 0; x < w; x += 32) {
        _mm_prefetch((const char *)(b0 + 2 * AHEAD * ldb + x), _MM_HINT_T0);
        _mm_prefetch((const char *)(b1 + 2 * AHEAD * ldb + x), _MM_HINT_T0);
      }
    for (int64_t s = 0; s * COLS < w; s++) {
      const int64_t cols = w - s * COLS;
      const __mmask32 mask = cols >= 32 ? 0xffffffffu : (__mmask32)((1u << cols) - 1);
      const __m512i r0 = p < k ? _mm512_maskz_loadu_epi16(mask, b0 + s * COLS) : _mm512_setzero_si512();
      const __m512i r1 = p + 1 < k ? _mm512_maskz_loadu_epi16(mask, b1 + s * COLS) : _mm512_setzero_si512();
      /* per 128-bit lane l: lo = pairs of columns 8l..8l+3, hi = 8l+4..8l+7 */
      const __m512i lo = _mm512_unpacklo_epi16(r0, r1), hi = _mm512_unpackhi_epi16(r0, r1);
      uint32_t *d = P + s * 2 * k2 * 16;
      _mm512_storeu_si512((void *)(d + q * 16), _mm512_permutex2var_epi64(lo, first, hi));
      _mm512_storeu_si512((void *)(d + (k2 + q) * 16), _mm512_permutex2var_epi64(lo, second, hi));
    }
  }
}

/* The four sums of a block over steps (of 32 k): tiles 4..7 += left(0, 1) . right(2, 3); left
 * tile t's step s at l[t] + s * 64 bytes (rows lstride bytes apart), right tile u's at
 * r[u] + s * 1024 bytes (rows 64 bytes apart). */
TAMX static void block_sums(int64_t steps, const char *l0, const char *l1, int64_t lstride, const char *r0,
                            const char *r1) {
  for (int64_t s = 0; s < steps; s++) {
    _tile_loadd(0, l0 + s * 64, lstride);
    _tile_loadd(1, l1 + s * 64, lstride);
    _tile_loadd(2, r0 + s * 1024, 64);
    _tile_loadd(3, r1 + s * 1024, 64);
    _tile_dpbf16ps(4, 0, 2);
    _tile_dpbf16ps(5, 0, 3);
    _tile_dpbf16ps(6, 1, 2);
    _tile_dpbf16ps(7, 1, 3);
  }
}

/* The two sums of a block of 16 rows: tiles 4, 5 += left(0) . right(2, 3), as block_sums. */
TAMX static void block_sums16(int64_t steps, const char *l0, int64_t lstride, const char *r0, const char *r1) {
  for (int64_t s = 0; s < steps; s++) {
    _tile_loadd(0, l0 + s * 64, lstride);
    _tile_loadd(2, r0 + s * 1024, 64);
    _tile_loadd(3, r1 + s * 1024, 64);
    _tile_dpbf16ps(4, 0, 2);
    _tile_dpbf16ps(5, 0, 3);
  }
}

/* Tiles 4..7 = the (32, 32) floats at t (rows stride bytes apart), or zero. */
TAMX static void sums_load(const float *t, int64_t stride) {
  if (!t) {
    _tile_zero(4);
    _tile_zero(5);
    _tile_zero(6);
    _tile_zero(7);
    return;
  }
  const int64_t half = 16 * (stride / 4); /* floats to row 16 */
  _tile_loadd(4, t, stride);
  _tile_loadd(5, t + 16, stride);
  _tile_loadd(6, t + half, stride);
  _tile_loadd(7, t + half + 16, stride);
}

TAMX static void sums_store(float *t, int64_t stride) {
  const int64_t half = 16 * (stride / 4);
  _tile_stored(4, t, stride);
  _tile_stored(5, t + 16, stride);
  _tile_stored(6, t + half, stride);
  _tile_stored(7, t + half + 16, stride);
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
  b->p = aligned_alloc(64, up((int64_t)bytes, 64));
  b->len = b->p ? bytes : 0;
  return b->p;
}

typedef struct {
  int trans_b, accumulate;
  int64_t m, n, k, k32, rows, ldb, ldc;
  const uint16_t *a; /* rounded A: (rows, k32) (B not transposed) or its k pairs (transposed) */
  const uint16_t *b;
  float *c;
  int64_t per;  /* columns of C per task, a multiple of 32 */
  char *work;   /* per task: task_bytes of its own (a panel of B, or 32 rows of it) */
  size_t task_bytes;
} amx_job;

/* Block (i0, j0) of C <-> t, the (32, 32) block of Cᵀ (rows 128 bytes apart): to_c 0 reads C into
 * t (accumulate), 1 writes t out. Only the part inside C is touched. */
static void block_io_t(const amx_job *j, int64_t i0, int64_t j0, float *t, int to_c) {
  const int64_t ri = j->m - i0 < ROWS ? j->m - i0 : ROWS, cj = j->n - j0 < COLS ? j->n - j0 : COLS;
  for (int64_t i = 0; i < ri; i++) {
    float *cr = j->c + (i0 + i) * j->ldc + j0;
    for (int64_t jj = 0; jj < cj; jj++) {
      if (to_c)
        cr[jj] = t[jj * 32 + i];
      else
        t[jj * 32 + i] = cr[jj];
    }
  }
}

/* cbuf (GROUP_ROWS, PANEL_COLS) <-> rows [g0, g0 + gr) and columns [j0, j0 + w) of C: to_c 0
 * copies C in (zeros outside it), 1 copies cbuf out (only what lies inside C). */
static void stage(const amx_job *j, int64_t g0, int64_t gr, int64_t j0, int64_t w, float *cbuf, int to_c) {
  const int64_t ri = j->m - g0 < gr ? j->m - g0 : gr, wc = (w + COLS - 1) / COLS * COLS;
  for (int64_t i = 0; i < (to_c ? ri : gr); i++) {
    float *cb = cbuf + i * PANEL_COLS, *cr = j->c + (g0 + i) * j->ldc + j0;
    if (to_c) {
      memcpy(cr, cb, (size_t)w * 4);
    } else if (i < ri) {
      memcpy(cb, cr, (size_t)w * 4);
      memset(cb + w, 0, (size_t)(wc - w) * 4);
    } else {
      memset(cb, 0, (size_t)wc * 4);
    }
  }
}

/* Columns [lo, hi) of C, B not transposed. Blocked so that B is read a few hundred bytes of a row
 * at a time (PANEL_COLS columns) and its packed panel (PANEL_K rows) stays in L2: the sums of a
 * group of rows live in cbuf between k blocks (float32 tile stores and loads are exact, so the
 * order of every sum is the plain one, k ascending). */
TAMX static void part_nn(const amx_job *j, int64_t lo, int64_t hi, void *work) {
  uint32_t *P = (uint32_t *)work;                    /* (subs, 2, kb / 2, 16) */
  float *cbuf = (float *)((char *)work + PANEL_BYTES); /* (GROUP_ROWS, PANEL_COLS) */
  const int64_t lstride = j->k32 * 2, cstride = PANEL_COLS * 4;
  for (int64_t g0 = 0; g0 < j->rows; g0 += GROUP_ROWS) {
    const int64_t gr = j->rows - g0 < GROUP_ROWS ? j->rows - g0 : GROUP_ROWS;
    for (int64_t j0 = lo; j0 < hi; j0 += PANEL_COLS) {
      const int64_t w = hi - j0 < PANEL_COLS ? hi - j0 : PANEL_COLS, subs = (w + COLS - 1) / COLS;
      if (j->accumulate) stage(j, g0, gr, j0, w, cbuf, 0);
      for (int64_t k0 = 0; k0 < j->k32; k0 += PANEL_K) {
        const int64_t kb = j->k32 - k0 < PANEL_K ? j->k32 - k0 : PANEL_K, k2 = kb / 2;
        pack_panel(j->b, j->ldb, j->k, k0, kb, j0, w, P);
        const int fresh = k0 == 0 && !j->accumulate;
        for (int64_t i0 = 0; i0 < gr; i0 += ROWS) {
          const char *l0 = (const char *)(j->a + (g0 + i0) * j->k32 + k0);
          for (int64_t s = 0; s < subs; s++) {
            float *cb = cbuf + i0 * PANEL_COLS + s * COLS;
            const char *r0 = (const char *)(P + s * 2 * k2 * 16), *r1 = (const char *)(P + (s * 2 + 1) * k2 * 16);
            if (gr - i0 >= ROWS) {
              sums_load(fresh ? NULL : cb, cstride);
              block_sums(kb / KSTEP, l0, l0 + 16 * lstride, lstride, r0, r1);
              sums_store(cb, cstride);
            } else { /* the last 16 rows */
              if (fresh) {
                _tile_zero(4);
                _tile_zero(5);
              } else {
                _tile_loadd(4, cb, cstride);
                _tile_loadd(5, cb + 16, cstride);
              }
              block_sums16(kb / KSTEP, l0, lstride, r0, r1);
              _tile_stored(4, cb, cstride);
              _tile_stored(5, cb + 16, cstride);
            }
          }
        }
      }
      stage(j, g0, gr, j0, w, cbuf, 1);
    }
  }
}

/* Columns [lo, hi) of C (rows of B), B transposed: blocks of Cᵀ = B rows . A pairs. */
TAMX static void part_t(const amx_job *j, int64_t lo, int64_t hi, void *work) {
  const int64_t k2 = j->k32 / 2;
  float t[32 * 32] __attribute__((aligned(64)));
  for (int64_t j0 = lo; j0 < hi; j0 += COLS) {
    /* 32 rows of B with k32 columns: in place, or copied with zero padding at an edge */
    const uint16_t *br = j->b + j0 * j->ldb;
    int64_t bstride = j->ldb * 2;
    if (j0 + COLS > j->n || j->k != j->k32) {
      uint16_t *cp = (uint16_t *)work; /* (32, k32) */
      memset(cp, 0, (size_t)(COLS * j->k32 * 2));
      for (int64_t r = 0; r < COLS && j0 + r < j->n; r++) memcpy(cp + r * j->k32, br + r * j->ldb, (size_t)j->k * 2);
      br = cp;
      bstride = j->k32 * 2;
    }
    for (int64_t i0 = 0; i0 < j->rows; i0 += ROWS) {
      if (j->accumulate) {
        memset(t, 0, sizeof t);
        block_io_t(j, i0, j0, t, 0);
        sums_load(t, 128);
      } else {
        sums_load(NULL, 128);
      }
      /* right operand: A's k pairs for rows i0.. (16 each), laid out [row block][pair][16] */
      const char *r0 = (const char *)((const uint32_t *)j->a + (i0 / 16) * k2 * 16);
      block_sums(j->k32 / KSTEP, (const char *)br, (const char *)br + 16 * bstride, bstride, r0, r0 + k2 * 64);
      sums_store(t, 128);
      block_io_t(j, i0, j0, t, 1);
    }
  }
}

TAMX static void run_amx(void *arg, int i) {
  amx_job *j = (amx_job *)arg;
  const int64_t lo = i * j->per, hi = lo + j->per < j->n ? lo + j->per : j->n;
  if (lo >= hi) return;
  tiles_on();
  void *work = j->work + (size_t)i * j->task_bytes;
  if (j->trans_b)
    part_t(j, lo, hi, work);
  else
    part_nn(j, lo, hi, work);
  _tile_release();
}

/* A's k pairs for the transposed route: dst[(ib * k2 + q) * 16 + r] = pair q of row 16 ib + r of
 * the rounded rows a16 (rows, k32). */
static void pair_rows(const uint16_t *a16, int64_t rows, int64_t k32, uint32_t *dst) {
  const int64_t k2 = k32 / 2;
  for (int64_t ib = 0; ib < rows / 16; ib++)
    for (int r = 0; r < 16; r++) {
      const uint32_t *row = (const uint32_t *)(a16 + (ib * 16 + r) * k32);
      uint32_t *d = dst + ib * k2 * 16 + r;
      for (int64_t q = 0; q < k2; q++) d[q * 16] = row[q];
    }
}

int gemm_amx_bf16(int trans_b, int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const uint16_t *b,
                  int64_t ldb, float *c, int64_t ldc, int accumulate, int threads) {
  if (!gemm_amx_available()) return 0;
  if (threads > MAX_POOL_TASKS) threads = MAX_POOL_TASKS;
  const int64_t blocks = (n + COLS - 1) / COLS;
  if (threads > blocks) threads = (int)blocks;
  if (threads < 1) threads = 1;
  /* rows of A: whole blocks of 32, or of 16 not transposed (a block of 16 then takes half the work) */
  const int64_t rows = up(m, trans_b ? ROWS : 16), k32 = up(k, KSTEP);
  const size_t abytes = (size_t)(rows * k32 * 2);
  /* per task: B transposed, 32 rows of B; else a panel of B and a group's sums */
  const size_t task_bytes = trans_b ? (size_t)(COLS * k32 * 2) : PANEL_BYTES + (size_t)GROUP_ROWS * PANEL_COLS * 4;
  /* every buffer is taken here, before any task starts: a failure leaves C untouched */
  uint16_t *a16 = (uint16_t *)grow(&shared_a, trans_b ? 2 * abytes : abytes);
  char *wk = (char *)grow(&work, task_bytes * (size_t)threads);
  if (!a16 || !wk) return 0;
  round_rows(a, lda, m, k, rows, k32, a16);
  const uint16_t *ause = a16;
  if (trans_b) {
    uint32_t *pairs = (uint32_t *)(a16 + rows * k32);
    pair_rows(a16, rows, k32, pairs);
    ause = (const uint16_t *)pairs;
  }
  amx_job j = {trans_b, accumulate, m,  n, k, k32, rows, ldb, ldc, ause, b, c, (blocks + threads - 1) / threads * COLS,
               wk,      task_bytes};
  run_tasks(threads, run_amx, &j);
  return 1;
}

#else

int gemm_amx_available(void) { return 0; }
int gemm_amx_bf16(int trans_b, int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const uint16_t *b,
                  int64_t ldb, float *c, int64_t ldc, int accumulate, int threads) {
  (void)trans_b, (void)m, (void)n, (void)k, (void)a, (void)lda, (void)b, (void)ldb, (void)c, (void)ldc;
  (void)accumulate, (void)threads;
  return 0;
}

#endif
