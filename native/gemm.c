/*
 * own_sgemm (gemm.h): the blocked driver, the packing routines, the portable micro-kernel, the
 * choice of kernel, and the split across threads.
 *
 * Loop nest of one thread's part of C (BLIS order):
 *   for jc in n, step NC:                 B block (kc, nc): packed once per (jc, pc)
 *     for pc in k, step KC:
 *       pack op(B)[pc:pc+kc, jc:jc+nc]     -> bpack: nc/NR panels of (kc, NR)
 *       for ic in m, step MC:              A block (mc, kc): packed once per (ic, pc), lives in L2
 *         pack op(A)[ic:ic+mc, pc:pc+kc]   -> apack: mc/MR panels of (kc, MR)
 *         for jr in nc, step NR:           B panel (kc, NR): stays in L1 across the ir loop
 *           for ir in mc, step MR:
 *             C[ic+ir, jc+jr] (MR, NR) (+)= apack panel . bpack panel      (the micro-kernel)
 * The first pc block writes C (adds to it, when the caller accumulates), later ones add to it. The
 * micro-kernels take edge tiles (fewer than MR rows or NR columns) themselves.
 * With few rows of A (a decode step: m is the batch) and B not transposed, B is read in place
 * (its rows ldb apart) instead of packed: packing would cost as much as the product itself.
 * A bf16 / f16 B (blas.h's DT_*) is widened to float32 where it is read: by the packing routines
 * into the float panels, and, where B is read in place, by the kernel and GEMV variants for its
 * dtype (kernel_info's arrays). Widening is exact, and every variant sums in the same order, so the
 * bits do not depend on the path (nor, for B not transposed, on how many rows share the product).
 */
#define _POSIX_C_SOURCE 200112L
#include "gemm.h"

#include "blas.h"

#include "parallel.h"
#include <stdlib.h>
#include <string.h>

typedef void (*pack_bt_fn)(const void *src, int b_dtype, int64_t ldb, int64_t kc, float *d);
typedef void (*pack_an_fn)(const float *src, int64_t lda, int64_t kc, int rows, float *d);
typedef void (*pack_bn_fn)(const uint16_t *src, int b_dtype, int64_t ldb, int64_t kc, int cols, float *d);

typedef struct {
  const char *name;
  gemm_ukernel kernel[3]; /* by B's dtype (DT_*): [DT_F32] for packed panels and a float B in place */
  int mr, nr;             /* tile of C per kernel call */
  int64_t kc, mc;         /* block sizes: k steps per packed panel, rows of A per packed block */
  int64_t nc;             /* columns of B per packed block */
  gemm_gemv gemv[3];      /* one row of A, B not transposed, by B's dtype */
  gemm_gemv gemvt[3];     /* one row of A, B transposed, by B's dtype; NULL: packed panels instead */
  pack_bn_fn pack_bn;     /* a (kc, NR) panel of a bf16 / f16 B not transposed, widened */
  pack_bt_fn pack_bt;     /* a whole (kc, NR) panel of a transposed B, or NULL for the plain loop */
  pack_an_fn pack_an;     /* a (kc, MR) panel of A not transposed, or NULL for the plain loop */
  int bf16_route;         /* where a bf16 B goes, A rounded to bf16 (BF16_*); 0: the kernels above, widened */
} kernel_info;

/* Routes of a bf16 B with A not transposed: the AMX tile units (gemm_amx.c), or AVX512_BF16's dot
 * products (gemm_bf16dot.c). */
enum { BF16_TILES = 1, BF16_DOT = 2 };

/* Bytes per element of B. */
static int64_t dt_size(int b_dtype) { return b_dtype == DT_F32 ? 4 : 2; }

/* Element i of B (dtype BT) as a float32. */
static inline __attribute__((always_inline)) float b_at(const int BT, const void *b, int64_t i) {
  return BT == DT_F32 ? ((const float *)b)[i] : gemm_half_to_f32(((const uint16_t *)b)[i], BT);
}

/* Portable C: MR = 4 x NR = 16; the compiler vectorizes the inner loop with whatever it has. Edge
 * tiles and A read in place take the plain loop; only rows x cols of C are stored, and B columns
 * past cols are not read. A bf16 / f16 B (read in place) is widened a step at a time into row. */
static inline __attribute__((always_inline)) void portable_body(const int BT, int rows, int cols, int64_t kc,
                                                                const float *ap, int64_t arow, int64_t astride,
                                                                const void *bp, int64_t bstride, float *c,
                                                                int64_t ldc, int accumulate) {
  float acc[4][16];
  float row[16]; /* (cols) step p of a half B, widened */
  memset(acc, 0, sizeof acc);
  const char *bb = (const char *)bp; /* step p of B, bstride elements apart */
  const int64_t bsb = bstride * dt_size(BT);
  for (int64_t p = 0; p < kc; p++) {
    const float *bq = (const float *)bb;
    if (BT != DT_F32) {
      for (int j = 0; j < cols; j++) row[j] = gemm_half_to_f32(((const uint16_t *)bb)[j], BT);
      bq = row;
    }
    if (rows == 4 && cols == 16 && arow == 1) {
      for (int i = 0; i < 4; i++) {
        const float a = ap[i];
        for (int j = 0; j < 16; j++) acc[i][j] += a * bq[j];
      }
    } else {
      for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++) acc[i][j] += ap[i * arow] * bq[j];
    }
    ap += astride;
    bb += bsb;
  }
  for (int i = 0; i < rows; i++)
    for (int j = 0; j < cols; j++) c[i * ldc + j] = accumulate ? c[i * ldc + j] + acc[i][j] : acc[i][j];
}

static void ukernel_portable(int rows, int cols, int64_t kc, const float *ap, int64_t arow, int64_t astride,
                             const void *bp, int64_t bstride, float *c, int64_t ldc, int accumulate) {
  portable_body(DT_F32, rows, cols, kc, ap, arow, astride, bp, bstride, c, ldc, accumulate);
}
static void ukernel_portable_bf16(int rows, int cols, int64_t kc, const float *ap, int64_t arow, int64_t astride,
                                  const void *bp, int64_t bstride, float *c, int64_t ldc, int accumulate) {
  portable_body(DT_BF16, rows, cols, kc, ap, arow, astride, bp, bstride, c, ldc, accumulate);
}
static void ukernel_portable_f16(int rows, int cols, int64_t kc, const float *ap, int64_t arow, int64_t astride,
                                 const void *bp, int64_t bstride, float *c, int64_t ldc, int accumulate) {
  portable_body(DT_F16, rows, cols, kc, ap, arow, astride, bp, bstride, c, ldc, accumulate);
}

/* c (n) = (or +=) sum over p of a[p * astride] * B[p, :], B's rows read in order into a chunk of c
 * that stays in L1, summed in blocks of kc steps as the portable micro-kernel sums (see
 * gemm_gemv_avx512); a half B's row is widened into row first, so the sums vectorize as for floats. */
enum { PCHUNK = 2048 };
static inline __attribute__((always_inline)) void gemv_portable_body(const int BT, int64_t k, int64_t n,
                                                                     const float *a, int64_t astride, const void *b,
                                                                     int64_t ldb, float *c, int64_t kc,
                                                                     int accumulate) {
  float t[PCHUNK];                      /* (cols) one block's sums */
  float row[PCHUNK]; /* (cols) row p of a half B, widened */
  for (int64_t j0 = 0; j0 < n; j0 += PCHUNK) {
    const int64_t cols = n - j0 < PCHUNK ? n - j0 : PCHUNK;
    float *cc = c + j0; /* (cols) */
    for (int64_t pc = 0; pc < k; pc += kc) {
      const int64_t pend = k - pc < kc ? k : pc + kc;
      memset(t, 0, (size_t)cols * sizeof(float));
      for (int64_t p = pc; p < pend; p++) {
        const float *b0, a0 = a[p * astride]; /* row p */
        if (BT == DT_F32) {
          b0 = (const float *)b + p * ldb + j0;
        } else {
          const uint16_t *h = (const uint16_t *)b + p * ldb + j0;
          for (int64_t j = 0; j < cols; j++) row[j] = gemm_half_to_f32(h[j], BT);
          b0 = row;
        }
        for (int64_t j = 0; j < cols; j++) t[j] += a0 * b0[j];
      }
      const int add = pc > 0 || accumulate;
      for (int64_t j = 0; j < cols; j++) cc[j] = add ? t[j] + cc[j] : t[j];
    }
  }
}

static void gemv_portable(int64_t k, int64_t n, const float *a, int64_t astride, const void *b, int64_t ldb,
                          float *c, int64_t kc, int accumulate) {
  gemv_portable_body(DT_F32, k, n, a, astride, b, ldb, c, kc, accumulate);
}
static void gemv_portable_bf16(int64_t k, int64_t n, const float *a, int64_t astride, const void *b, int64_t ldb,
                               float *c, int64_t kc, int accumulate) {
  gemv_portable_body(DT_BF16, k, n, a, astride, b, ldb, c, kc, accumulate);
}
static void gemv_portable_f16(int64_t k, int64_t n, const float *a, int64_t astride, const void *b, int64_t ldb,
                              float *c, int64_t kc, int accumulate) {
  gemv_portable_body(DT_F16, k, n, a, astride, b, ldb, c, kc, accumulate);
}

/* d (kc, 16) = the (kc, cols) panel of a bf16 / f16 B at src (rows ldb apart), widened; columns
 * past cols zero. */
static void pack_bn_portable(const uint16_t *src, int b_dtype, int64_t ldb, int64_t kc, int cols, float *d) {
  for (int64_t p = 0; p < kc; p++) {
    const uint16_t *h = src + p * ldb; /* (cols) step p */
    float *dd = d + p * 16;
    int j = 0;
    if (b_dtype == DT_BF16)
      for (; j < cols; j++) dd[j] = gemm_half_to_f32(h[j], DT_BF16);
    else
      for (; j < cols; j++) dd[j] = gemm_half_to_f32(h[j], DT_F16);
    for (; j < 16; j++) dd[j] = 0.0f;
  }
}

static const kernel_info PORTABLE = {"portable",
                                     {ukernel_portable, ukernel_portable_bf16, ukernel_portable_f16},
                                     4,
                                     16,
                                     256,
                                     64,
                                     2048,
                                     {gemv_portable, gemv_portable_bf16, gemv_portable_f16},
                                     {NULL, NULL, NULL},
                                     pack_bn_portable,
                                     NULL,
                                     NULL,
                                     0};
#if defined(__x86_64__) || defined(_M_X64)
/* The AVX-512 kernels; with a route, a bf16 B goes to the AMX tile units or the bf16 dot products. */
#define AVX512_INFO(NAME, ROUTE)                                                                    \
  {NAME,                                                                                            \
   {gemm_ukernel_avx512, gemm_ukernel_avx512_bf16, gemm_ukernel_avx512_f16},                        \
   12,                                                                                              \
   32,                                                                                              \
   384,                                                                                             \
   144,                                                                                             \
   4096,                                                                                            \
   {gemm_gemv_avx512, gemm_gemv_avx512_bf16, gemm_gemv_avx512_f16},                                 \
   {gemm_gemvt_avx512, gemm_gemvt_avx512_bf16, gemm_gemvt_avx512_f16},                              \
   gemm_pack_bn_avx512,                                                                             \
   gemm_pack_bt_avx512,                                                                             \
   gemm_pack_an_avx512,                                                                             \
   ROUTE}
static const kernel_info AVX512 = AVX512_INFO("avx512", 0);
static const kernel_info AMX = AVX512_INFO("amx", BF16_TILES);
static const kernel_info AVX512_BF16 = AVX512_INFO("avx512bf16", BF16_DOT);
static const kernel_info AVX2 = {"avx2",
                                 {gemm_ukernel_avx2, gemm_ukernel_avx2_bf16, gemm_ukernel_avx2_f16},
                                 6,
                                 16,
                                 256,
                                 96,
                                 4096,
                                 {gemm_gemv_avx2, gemm_gemv_avx2_bf16, gemm_gemv_avx2_f16},
                                 {NULL, NULL, NULL},
                                 gemm_pack_bn_avx2,
                                 NULL,
                                 NULL,
                                 0};
#endif

static const kernel_info *chosen = NULL;

static const kernel_info *best_kernel(void) {
#if defined(__x86_64__) || defined(_M_X64)
  if (gemm_cpu_has_avx512() && gemm_amx_available()) return &AMX;
  if (gemm_cpu_has_avx512_bf16()) return &AVX512_BF16;
  if (gemm_cpu_has_avx512()) return &AVX512;
  if (gemm_cpu_has_avx2()) return &AVX2;
#endif
  return &PORTABLE;
}

static const kernel_info *kernel(void) {
  if (!chosen) chosen = best_kernel(); /* a race only writes the same value twice */
  return chosen;
}

const char *own_sgemm_kernel(void) { return kernel()->name; }

/* Forces a kernel by name ("amx", "avx512bf16", "avx512", "avx2", "portable"), or the best one for "auto". Returns 0
 * when the name is unknown or the CPU cannot run that kernel (nothing changes then). */
int own_sgemm_force_kernel(const char *name) {
  if (strcmp(name, "auto") == 0) {
    chosen = best_kernel();
    return 1;
  }
  if (strcmp(name, "portable") == 0) {
    chosen = &PORTABLE;
    return 1;
  }
#if defined(__x86_64__) || defined(_M_X64)
  if (strcmp(name, "avx2") == 0 && gemm_cpu_has_avx2()) {
    chosen = &AVX2;
    return 1;
  }
  if (strcmp(name, "avx512") == 0 && gemm_cpu_has_avx512()) {
    chosen = &AVX512;
    return 1;
  }
  if (strcmp(name, "amx") == 0 && gemm_cpu_has_avx512() && gemm_amx_available()) {
    chosen = &AMX;
    return 1;
  }
  if (strcmp(name, "avx512bf16") == 0 && gemm_cpu_has_avx512_bf16()) {
    chosen = &AVX512_BF16;
    return 1;
  }
#endif
  return 0;
}

static int gemm_threads = 1;
void own_sgemm_set_threads(int threads) {
  gemm_threads = threads < 1 ? 1 : threads > MAX_POOL_TASKS ? MAX_POOL_TASKS : threads;
}
int own_sgemm_threads(void) { return gemm_threads; }

typedef struct {
  int trans_a, trans_b;
  int64_t m, n, k;
  const float *a;
  const void *b; /* elements of b_dtype */
  int b_dtype, accumulate;
  int64_t lda, ldb, ldc;
  float *c;
} gemm_args;

/* (mc, kc) block of op(A) at (i0, p0) -> panels of MR rows, (kc, MR) each; rows past mc are zero. */
static void pack_a(const kernel_info *K, const gemm_args *g, int64_t i0, int64_t p0, int64_t mc, int64_t kc,
                   float *dst) {
  const int mr = K->mr;
  if (g->trans_a) {
    /* op(A)(i, p) = A[p, i]: row p of A holds step p of every panel; read each row once, in order */
    for (int64_t p = 0; p < kc; p++) {
      const float *src = g->a + (p0 + p) * g->lda + i0; /* (mc) */
      for (int64_t ir = 0; ir < mc; ir += mr) {
        const int64_t rows = mc - ir < mr ? mc - ir : mr;
        float *dd = dst + (ir / mr) * kc * mr + p * mr; /* step p of panel ir / MR */
        int64_t i = 0;
        if (rows == 12) { /* the AVX-512 panel: a copy of known size, inlined */
          memcpy(dd, src + ir, 12 * sizeof(float));
          continue;
        }
        for (; i < rows; i++) dd[i] = src[ir + i];
        for (; i < mr; i++) dd[i] = 0.0f;
      }
    }
    return;
  }
  /* op(A)(i, p) = A[i, p]: rows of A are contiguous in p; each panel is written in order while its
   * MR source rows are read side by side */
  for (int64_t ir = 0; ir < mc; ir += mr) {
    const int64_t rows = mc - ir < mr ? mc - ir : mr;
    float *d = dst + (ir / mr) * kc * mr;                /* (kc, MR) */
    const float *src = g->a + (i0 + ir) * g->lda + p0; /* (rows, kc) rows lda apart */
    if (K->pack_an) {
      K->pack_an(src, g->lda, kc, (int)rows, d);
      continue;
    }
    for (int64_t p = 0; p < kc; p++) {
      float *dd = d + p * mr;
      int64_t i = 0;
      for (; i < rows; i++) dd[i] = src[i * g->lda + p];
      for (; i < mr; i++) dd[i] = 0.0f;
    }
  }
}

/* d (kc, nr) = the transpose of the (cols, kc) rows of B (dtype BT) from element at, ldb apart,
 * widened; columns past cols zero. */
static inline __attribute__((always_inline)) void pack_bt_plain(const int BT, const void *b, int64_t at, int64_t ldb,
                                                                int64_t kc, int64_t cols, int nr, float *d) {
  for (int64_t p = 0; p < kc; p++) {
    float *dd = d + p * nr;
    int64_t j = 0;
    for (; j < cols; j++) dd[j] = b_at(BT, b, at + j * ldb + p);
    for (; j < nr; j++) dd[j] = 0.0f;
  }
}

/* (kc, cols) panel of op(B) at (p0, j0), cols <= NR -> (kc, NR) with columns past cols zero; a
 * bf16 / f16 B is widened as it is copied. */
static void pack_b_panel(const kernel_info *K, const gemm_args *g, int64_t p0, int64_t j0, int64_t kc, int64_t cols,
                         float *d) {
  const int nr = K->nr;
  if (!g->trans_b) {
    /* op(B)(p, j) = B[p, j]: NR contiguous elements per step */
    if (g->b_dtype != DT_F32) {
      K->pack_bn((const uint16_t *)g->b + p0 * g->ldb + j0, g->b_dtype, g->ldb, kc, (int)cols, d);
      return;
    }
    for (int64_t p = 0; p < kc; p++) {
      const float *src = (const float *)g->b + (p0 + p) * g->ldb + j0; /* (cols) */
      if (cols == 32) { /* the AVX-512 panel: a copy of known size, inlined */
        memcpy(d + p * nr, src, 32 * sizeof(float));
        continue;
      }
      memcpy(d + p * nr, src, (size_t)cols * sizeof(float));
      if (cols < nr) memset(d + p * nr + cols, 0, (size_t)(nr - cols) * sizeof(float));
    }
  } else {
    /* op(B)(p, j) = B[j, p]: each column of the panel is a contiguous row of B. Written row by
     * row of the panel: the cols source rows are read side by side and stay in L1. */
    const int64_t at = j0 * g->ldb + p0; /* element (j0, p0): (cols, kc) rows ldb apart */
    if (cols == nr && K->pack_bt) {
      K->pack_bt((const char *)g->b + at * dt_size(g->b_dtype), g->b_dtype, g->ldb, kc, d);
      return;
    }
    if (g->b_dtype == DT_BF16)
      pack_bt_plain(DT_BF16, g->b, at, g->ldb, kc, cols, nr, d);
    else if (g->b_dtype == DT_F16)
      pack_bt_plain(DT_F16, g->b, at, g->ldb, kc, cols, nr, d);
    else
      pack_bt_plain(DT_F32, g->b, at, g->ldb, kc, cols, nr, d);
  }
}

/* Per-thread packing buffers, grown as needed and kept (a thread calls again and again). */
typedef struct {
  float *a, *b;
  size_t a_len, b_len;
} workspace;

static float *grow(float **buf, size_t *len, size_t need) {
  if (*len >= need) return *buf;
  free(*buf);
  *buf = NULL;
  *len = 0;
  void *p = NULL;
  if (posix_memalign(&p, 64, need * sizeof(float)) != 0) return NULL;
  *buf = (float *)p;
  *len = need;
  return *buf;
}

/* B's rows at least this far apart (a vocabulary-wide head) are packed even for few rows of A: read
 * in place, every step of a panel would land on a page of its own (measured: the 0.5B model's head,
 * 32 rows, 91 GFLOPS in place against 125 packed, B cold). */
#define DIRECT_B_MAX_ROW_BYTES ((int64_t)1 << 16)

/* How many rows of A make B worth reading in place rather than packing (see the header). */
static int64_t direct_b_rows(const kernel_info *K) { return 4 * (int64_t)K->mr; }
/* Up to how many columns of C A is read in place rather than packed: a transposed A is read
 * MR floats at a time but a row of it per step, so it wins only for fewer columns (measured). */
static int64_t direct_a_cols(const kernel_info *K, int trans_a) { return (trans_a ? 2 : 4) * (int64_t)K->nr; }

/* C[m0:m1, n0:n1] of the product, with this thread's workspace. Returns 0 when out of memory. */
static int gemm_part(const kernel_info *K, const gemm_args *g, int64_t m0, int64_t m1, int64_t n0, int64_t n1,
                     workspace *ws) {
  const int mr = K->mr, nr = K->nr;
  const int direct_b = !g->trans_b && m1 - m0 <= direct_b_rows(K) && g->ldb * dt_size(g->b_dtype) < DIRECT_B_MAX_ROW_BYTES;
  /* A transposed B with one block of rows (a decode step of one sequence, B held (n, k)): each
   * panel is packed right before its one use, so it stays in L1 instead of a large packed block
   * going out to memory and back. The same panels and kernel calls, so the same bits. */
  const int stream_b = !direct_b && m1 - m0 <= mr;
  /* With few columns each element of A is used only n / NR times: read it in place, unpacked. */
  const int direct_a = n1 - n0 <= direct_a_cols(K, g->trans_a);
  /* B in place in its own dtype, or packed panels of floats */
  const gemm_ukernel kernel = K->kernel[direct_b ? g->b_dtype : DT_F32];
  const int64_t esz = dt_size(g->b_dtype);
  for (int64_t jc = n0; jc < n1; jc += K->nc) {
    const int64_t nc = n1 - jc < K->nc ? n1 - jc : K->nc;
    for (int64_t pc = 0; pc < g->k; pc += K->kc) {
      const int64_t kc = g->k - pc < K->kc ? g->k - pc : K->kc;
      const int accumulate = pc > 0 || g->accumulate;
      float *bpack = NULL;
      if (stream_b) {
        bpack = grow(&ws->b, &ws->b_len, (size_t)(kc * nr)); /* one (kc, NR) panel at a time */
        if (!bpack) return 0;
      } else if (!direct_b) {
        const int64_t panels = (nc + nr - 1) / nr;
        bpack = grow(&ws->b, &ws->b_len, (size_t)(panels * kc * nr)); /* panels x (kc, NR) */
        if (!bpack) return 0;
        for (int64_t jr = 0; jr < nc; jr += nr)
          pack_b_panel(K, g, pc, jc + jr, kc, nc - jr < nr ? nc - jr : nr, bpack + (jr / nr) * kc * nr);
      }
      for (int64_t ic = m0; ic < m1; ic += K->mc) {
        const int64_t mc = m1 - ic < K->mc ? m1 - ic : K->mc;
        float *apack = NULL;
        if (!direct_a) {
          apack = grow(&ws->a, &ws->a_len, (size_t)(((mc + mr - 1) / mr) * kc * mr)); /* (mc/MR) x (kc, MR) */
          if (!apack) return 0;
          pack_a(K, g, ic, pc, mc, kc, apack);
        }
        for (int64_t jr = 0; jr < nc; jr += nr) {
          const int cols = (int)(nc - jr < nr ? nc - jr : nr);
          if (stream_b) pack_b_panel(K, g, pc, jc + jr, kc, cols, bpack);
          /* (kc, NR) panel of B, rows bs elements apart: packed floats, or B itself read in place */
          const void *bp = direct_b   ? (const void *)((const char *)g->b + (pc * g->ldb + jc + jr) * esz)
                           : stream_b ? (const void *)bpack
                                      : (const void *)(bpack + (jr / nr) * kc * nr);
          const int64_t bs = direct_b ? g->ldb : nr;
          for (int64_t ir = 0; ir < mc; ir += mr) {
            const int rows = (int)(mc - ir < mr ? mc - ir : mr);
            float *cp = g->c + (ic + ir) * g->ldc + jc + jr; /* (rows, cols) of C */
            if (!direct_a) {
              kernel(rows, cols, kc, apack + (ir / mr) * kc * mr, 1, mr, bp, bs, cp, g->ldc, accumulate);
            } else if (g->trans_a) { /* op(A)(i, p) = A[p, i] */
              kernel(rows, cols, kc, g->a + pc * g->lda + ic + ir, 1, g->lda, bp, bs, cp, g->ldc, accumulate);
            } else { /* op(A)(i, p) = A[i, p] */
              kernel(rows, cols, kc, g->a + (ic + ir) * g->lda + pc, g->lda, 1, bp, bs, cp, g->ldc, accumulate);
            }
          }
        }
      }
    }
  }
  return 1;
}

#define MAX_GEMM_THREADS MAX_POOL_TASKS

typedef struct {
  const kernel_info *K;
  const gemm_args *g;
  int by_rows;
  int64_t per, unit, len; /* task i takes [i * per * unit, (i + 1) * per * unit) of the split side */
  workspace *ws;          /* (tasks) the calling thread's workspaces */
  int ok[MAX_GEMM_THREADS];
} split_job;

static void run_part(void *arg, int i) {
  split_job *j = (split_job *)arg;
  const int64_t lo = i * j->per * j->unit, end = (i + 1) * j->per * j->unit, hi = end < j->len ? end : j->len;
  const gemm_args *g = j->g;
  j->ok[i] = lo >= hi || gemm_part(j->K, g, j->by_rows ? lo : 0, j->by_rows ? hi : g->m, j->by_rows ? 0 : lo,
                                   j->by_rows ? g->n : hi, &j->ws[i]);
}

/* One workspace per task slot, owned by the calling thread (its pool's helpers borrow them). */
static __thread workspace slots[MAX_GEMM_THREADS];

/* Below this many multiply-adds per thread a helper costs more than it saves. */
#define MIN_FMAS_PER_THREAD (1 << 18)

typedef struct {
  gemm_gemv fn;
  int64_t k, n, astride, ldb, kc, per, esz; /* task i takes columns [i * per, (i + 1) * per) */
  int64_t col_step;                          /* elements from one column of B to the next: 1, or ldb (B transposed) */
  const float *a;
  const void *b; /* (k, n) elements of esz bytes, rows ldb apart */
  float *c;
  int accumulate;
} gemv_job;

static void run_gemv(void *arg, int i) {
  const gemv_job *j = (const gemv_job *)arg;
  const int64_t lo = i * j->per, hi = lo + j->per < j->n ? lo + j->per : j->n;
  if (lo < hi)
    j->fn(j->k, hi - lo, j->a, j->astride, (const char *)j->b + lo * j->col_step * j->esz, j->ldb, j->c + lo, j->kc,
          j->accumulate);
}

/* c (n) (+)= a (k) . op(B) (k, n) with fn (a gemv, or a gemvt when B is transposed), the columns
 * split across threads in runs of 64. */
static void gemv_threads(const kernel_info *K, gemm_gemv fn, int trans_b, int64_t k, int64_t n, const float *a,
                         int64_t astride, const void *b, int b_dtype, int64_t ldb, float *c, int accumulate) {
  int64_t t = gemm_threads;
  if (t > 1 && (double)k * (double)n / (double)t < MIN_FMAS_PER_THREAD) t = (int64_t)((double)k * n / MIN_FMAS_PER_THREAD);
  if (t < 1) t = 1;
  const int64_t per = ((n + t - 1) / t + 63) / 64 * 64;
  gemv_job job = {fn, k, n, astride, ldb, K->kc, per, dt_size(b_dtype), trans_b ? ldb : 1, a, b, c, accumulate};
  run_tasks((int)t, run_gemv, &job);
}

/* A bf16 B (A not transposed) on the kernel's route for it, if it has one: 0 when it has none, or the
 * route could not take it (no buffers), with C untouched. */
static int bf16_routed(const kernel_info *K, int trans_b, int64_t m, int64_t n, int64_t k, const float *a,
                       int64_t lda, const void *b, int64_t ldb, float *c, int64_t ldc, int accumulate, int threads) {
#if defined(__x86_64__) || defined(_M_X64)
  if (K->bf16_route == BF16_TILES)
    return gemm_amx_bf16(trans_b, m, n, k, a, lda, (const uint16_t *)b, ldb, c, ldc, accumulate, threads);
  if (K->bf16_route == BF16_DOT)
    return gemm_dot_bf16(trans_b, m, n, k, a, lda, (const uint16_t *)b, ldb, c, ldc, accumulate, threads);
#else
  (void)K, (void)trans_b, (void)m, (void)n, (void)k, (void)a, (void)lda, (void)b, (void)ldb, (void)c, (void)ldc;
  (void)accumulate, (void)threads;
#endif
  return 0;
}

/* The general product (gemm.h). */
void own_gemm(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const void *b,
              int b_dtype, int64_t ldb, float *c, int64_t ldc, int accumulate) {
  if (m <= 0 || n <= 0) return;
  if (b_dtype != DT_F32 && b_dtype != DT_BF16 && b_dtype != DT_F16) abort(); /* a caller's bug: no such dtype */
  if (k <= 0) { /* an empty sum: C = 0, or C unchanged */
    if (!accumulate)
      for (int64_t i = 0; i < m; i++) memset(c + i * ldc, 0, (size_t)n * sizeof(float));
    return;
  }
  const kernel_info *K = kernel();
  if (b_dtype == DT_BF16 && !trans_a && bf16_routed(K, trans_b, m, n, k, a, lda, b, ldb, c, ldc, accumulate, gemm_threads))
    return;
  if (m == 1 && (!trans_b || K->gemvt[b_dtype])) {
    /* a row of A: (k) floats, astride apart */
    gemv_threads(K, trans_b ? K->gemvt[b_dtype] : K->gemv[b_dtype], trans_b, k, n, a, trans_a ? lda : 1, b, b_dtype,
                 ldb, c, accumulate);
    return;
  }
  const gemm_args g = {trans_a, trans_b, m, n, k, a, b, b_dtype, accumulate, lda, ldb, ldc, c};
  /* Threads split the longer side of C into runs of whole tiles: each packs its own panels of the
   * other operand, so the side that is split is the one whose packing is not repeated. */
  const int by_rows = m >= n;
  const int64_t unit = by_rows ? K->mr : K->nr, len = by_rows ? m : n;
  int64_t t = gemm_threads;
  const int64_t tiles = (len + unit - 1) / unit;
  if (t > tiles) t = tiles;
  const double fmas = (double)m * (double)n * (double)k;
  if (t > 1 && fmas / (double)t < MIN_FMAS_PER_THREAD) t = (int64_t)(fmas / MIN_FMAS_PER_THREAD);
  if (t < 1) t = 1;
  split_job job = {K, &g, by_rows, (tiles + t - 1) / t, unit, len, slots, {0}};
  run_tasks((int)t, run_part, &job);
  /* Out of memory for the packing buffers: the plain loop needs none. */
  for (int64_t i = 0; i < t; i++) {
    if (job.ok[i]) continue;
    const int64_t lo = i * job.per * unit, end = (i + 1) * job.per * unit, hi = end < len ? end : len;
    for (int64_t r = by_rows ? lo : 0; r < (by_rows ? hi : m); r++)
      for (int64_t col = by_rows ? 0 : lo; col < (by_rows ? n : hi); col++) {
        float s = 0.0f;
        for (int64_t p = 0; p < k; p++) {
          const int64_t bi = trans_b ? col * ldb + p : p * ldb + col; /* element (p, col) of op(B) */
          s += (trans_a ? a[p * lda + r] : a[r * lda + p]) *
               (b_dtype == DT_F32 ? ((const float *)b)[bi] : gemm_half_to_f32(((const uint16_t *)b)[bi], b_dtype));
        }
        c[r * ldc + col] = accumulate ? c[r * ldc + col] + s : s;
      }
  }
}

/* The same product on the calling thread alone (gemm.h). */
int own_gemm_1t(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const void *b,
                int b_dtype, int64_t ldb, float *c, int64_t ldc, int accumulate) {
  if (m <= 0 || n <= 0) return 1;
  if (k <= 0) {
    if (!accumulate)
      for (int64_t i = 0; i < m; i++) memset(c + i * ldc, 0, (size_t)n * sizeof(float));
    return 1;
  }
  const kernel_info *K = kernel();
  if (b_dtype == DT_BF16 && !trans_a && bf16_routed(K, trans_b, m, n, k, a, lda, b, ldb, c, ldc, accumulate, 1))
    return 1;
  if (m == 1 && (!trans_b || K->gemvt[b_dtype])) {
    (trans_b ? K->gemvt : K->gemv)[b_dtype](k, n, a, trans_a ? lda : 1, b, ldb, c, K->kc, accumulate);
    return 1;
  }
  const gemm_args g = {trans_a, trans_b, m, n, k, a, b, b_dtype, accumulate, lda, ldb, ldc, c};
  /* this thread's own workspace: a pool helper's slots are its own, unused by anyone else */
  return gemm_part(K, &g, 0, m, 0, n, &slots[0]);
}

void own_sgemm(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
               const float *b, int64_t ldb, float *c, int64_t ldc) {
  own_gemm(trans_a, trans_b, m, n, k, a, lda, b, DT_F32, ldb, c, ldc, 0);
}
