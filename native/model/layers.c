/*
 * The decoder's layers, each a forward and an explicit backward (as llm.c pairs them), over
 * float32 row-major buffers; notation in model.h. Backward functions add into gradient
 * accumulators (dw, dbias, dla, ...) and either write or add the input gradient as each says.
 * Element-wise loops are split across fused_threads() (parallel.h); matrix products go through
 * blas_gemm (its own threads).
 */
#include "layers.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../gemm.h"
#include "../parallel.h"
#include "../vec_math.h"

/* float32 of a bf16 / f16 / f32 element i of a stored matrix. */
static inline float elem_f32(const void *data, int dtype, int64_t i) {
  return dtype == DT_F32 ? ((const float *)data)[i] : gemm_half_to_f32(((const uint16_t *)data)[i], dtype);
}

/* ------------------------------------------------------------------------------------------ */
/* Embedding lookup                                                                           */
/* ------------------------------------------------------------------------------------------ */

typedef struct {
  const model_t *m;
  const int32_t *tokens; /* (N) */
  int64_t N;
  float *x;        /* (N, H): forward output */
  const float *dx; /* (N, H): backward input */
} embed_ctx;

static void embed_fwd_rows(void *p, int64_t lo, int64_t hi, int chunk) {
  (void)chunk;
  const embed_ctx *c = (const embed_ctx *)p;
  const model_t *m = c->m;
  const int64_t H = m->H, V = m->V;
  for (int64_t i = lo; i < hi; i++) {
    float *xr = c->x + i * H; /* (H) */
    const int64_t tok = c->tokens[i];
    if (m->tied) { /* column tok of the head (H, V) */
      for (int64_t h = 0; h < H; h++) xr[h] = elem_f32(m->head.w.data, m->head.w.dtype, h * V + tok);
    } else { /* row tok of the embedding (V, H) */
      for (int64_t h = 0; h < H; h++) xr[h] = elem_f32(m->embed.data, m->embed.dtype, tok * H + h);
    }
  }
}

void embed_forward(const model_t *m, const int32_t *tokens, int64_t N, float *x) {
  embed_ctx c = {m, tokens, N, x, NULL};
  parallel_for(N, GRAIN_FLOATS / m->H + 1, embed_fwd_rows, &c);
}

/* Threads split the hidden dimension, so no two write the same gradient entry. */
static void embed_bwd_cols(void *p, int64_t lo, int64_t hi, int chunk) {
  (void)chunk;
  const embed_ctx *c = (const embed_ctx *)p;
  const model_t *m = c->m;
  const int64_t H = m->H, V = m->V;
  for (int64_t i = 0; i < c->N; i++) {
    const float *dxr = c->dx + i * H; /* (H) */
    const int64_t tok = c->tokens[i];
    if (m->tied) {
      for (int64_t h = lo; h < hi; h++) m->head.dw[h * V + tok] += dxr[h];
    } else {
      float *dr = m->dembed + tok * H; /* (H) */
      for (int64_t h = lo; h < hi; h++) dr[h] += dxr[h];
    }
  }
}

void embed_backward(const model_t *m, const int32_t *tokens, int64_t N, const float *dx) {
  if (m->tied ? !m->head.dw : !m->dembed) return;
  embed_ctx c = {m, tokens, N, NULL, dx};
  parallel_for(m->H, 64, embed_bwd_cols, &c);
}

/* ------------------------------------------------------------------------------------------ */
/* RMSNorm: y = x · rstd · w, rstd = 1 / sqrt(mean(x²) + eps) per row                          */
/* ------------------------------------------------------------------------------------------ */

typedef struct {
  const float *x, *w; /* (N, H), (H) */
  float *y, *rstd;    /* (N, H), (N) */
  const float *dy;    /* (N, H) backward */
  float *dx;          /* (N, H) backward: += */
  double *dw_part;    /* (chunks, H) */
  int64_t H;
  float eps;
} rms_ctx;

ROW_LOOP static void rms_fwd_rows(void *p, int64_t lo, int64_t hi, int chunk) {
  (void)chunk;
  const rms_ctx *c = (const rms_ctx *)p;
  const int64_t H = c->H;
  for (int64_t i = lo; i < hi; i++) {
    const float *xr = c->x + i * H;
    float *yr = c->y + i * H;
    const float s = 1.0f / sqrtf(dot8(xr, xr, H) / (float)H + c->eps);
    c->rstd[i] = s;
    for (int64_t j = 0; j < H; j++) yr[j] = (xr[j] * s) * c->w[j];
  }
}

void rmsnorm_forward(const float *x, const float *w, float *y, float *rstd, int64_t N, int64_t H, float eps) {
  rms_ctx c = {x, w, y, rstd, NULL, NULL, NULL, H, eps};
  parallel_for(N, GRAIN_FLOATS / H + 1, rms_fwd_rows, &c);
}

/*
 * With s = rstd, xn = x·s, y = xn·w:
 *   dw[j] += Σ_rows dy[j]·xn[j];   dx[j] += s·dy[j]·w[j] - x[j]·s³·(Σ_k dy[k]·w[k]·x[k]) / H
 */
ROW_LOOP static void rms_bwd_rows(void *p, int64_t lo, int64_t hi, int chunk) {
  const rms_ctx *c = (const rms_ctx *)p;
  const int64_t H = c->H;
  double *dw = c->dw_part ? c->dw_part + (int64_t)chunk * H : NULL; /* (H) */
  for (int64_t i = lo; i < hi; i++) {
    const float *xr = c->x + i * H, *dyr = c->dy + i * H;
    float *dxr = c->dx + i * H;
    const float s = c->rstd[i];
    float acc = 0.0f;
    {
      float a8[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      int64_t j = 0;
      for (; j + 8 <= H; j += 8)
        for (int l = 0; l < 8; l++) a8[l] += dyr[j + l] * c->w[j + l] * xr[j + l];
      acc = ((a8[0] + a8[1]) + (a8[2] + a8[3])) + ((a8[4] + a8[5]) + (a8[6] + a8[7]));
      for (; j < H; j++) acc += dyr[j] * c->w[j] * xr[j];
    }
    const float k = s * s * s * acc / (float)H;
    for (int64_t j = 0; j < H; j++) dxr[j] += s * dyr[j] * c->w[j] - xr[j] * k;
    if (dw)
      for (int64_t j = 0; j < H; j++) dw[j] += (double)(dyr[j] * (xr[j] * s));
  }
}

int rmsnorm_backward(const float *x, const float *w, const float *rstd, const float *dy, float *dx, float *dw,
                     int64_t N, int64_t H) {
  const int64_t grain = GRAIN_FLOATS / H + 1;
  const int chunks = parallel_chunks(N, grain);
  double *part = NULL;
  if (dw) {
    part = (double *)calloc((size_t)(chunks * H), sizeof(double)); /* (chunks, H) */
    if (!part) return 0;
  }
  rms_ctx c = {x, w, NULL, (float *)rstd, dy, dx, part, H, 0.0f};
  parallel_for(N, grain, rms_bwd_rows, &c);
  if (dw) {
    for (int64_t j = 0; j < H; j++) {
      double s = 0;
      for (int k = 0; k < chunks; k++) s += part[k * H + j];
      dw[j] += (float)s;
    }
    free(part);
  }
  return 1;
}

/* ------------------------------------------------------------------------------------------ */
/* Linear layers, with an optional bias and LoRA adapter                                      */
/* ------------------------------------------------------------------------------------------ */

typedef struct {
  float *y;          /* (N, out) */
  const float *bias; /* (out) */
  int64_t out;
} bias_ctx;

static void bias_rows(void *p, int64_t lo, int64_t hi, int chunk) {
  (void)chunk;
  const bias_ctx *c = (const bias_ctx *)p;
  for (int64_t i = lo; i < hi; i++) {
    float *yr = c->y + i * c->out;
    for (int64_t j = 0; j < c->out; j++) yr[j] += c->bias[j];
  }
}

static int dropping(const linear_t *lin, const lora_drop *d) { return lin->la && d && d->p > 0.0f; }

/* y (N, out) = x (N, in) @ w [+ bias] [+ scale · xa @ lb], with xa (N, r) = drop(x) @ la written to
 * `xa`. Returns 0 when out of memory. */
int linear_forward(const linear_t *lin, const float *x, int64_t N, float *y, float *xa, const lora_drop *drop) {
  const int64_t in = lin->w.rows, out = lin->w.cols;
  blas_gemm(0, 0, N, out, in, x, in, lin->w.data, lin->w.dtype, out, y, out, 0);
  if (lin->bias) {
    bias_ctx c = {y, lin->bias, out};
    parallel_for(N, GRAIN_FLOATS / out + 1, bias_rows, &c);
  }
  if (lin->la) {
    const int64_t r = lin->rank;
    float *xd = NULL; /* (N, in) the adapter's dropped input */
    if (dropping(lin, drop)) {
      xd = (float *)malloc((size_t)(N * in) * sizeof(float));
      if (!xd) return 0;
      lora_drop_apply(drop, x, xd, N, in, 0);
    }
    blas_gemm(0, 0, N, r, in, xd ? xd : x, in, lin->la, DT_F32, r, xa, r, 0); /* xa (N, r) */
    free(xd);
    float *xs = (float *)malloc((size_t)(N * r) * sizeof(float));  /* (N, r) scale · xa */
    if (!xs) return 0;
    for (int64_t i = 0; i < N * r; i++) xs[i] = xa[i] * lin->scale;
    blas_gemm(0, 0, N, out, r, xs, r, lin->lb, DT_F32, out, y, out, 1);
    free(xs);
  }
  return 1;
}

typedef struct {
  const float *dy; /* (N, out) */
  double *part;    /* (chunks, out) */
  int64_t out;
} colsum_ctx;

static void colsum_rows(void *p, int64_t lo, int64_t hi, int chunk) {
  const colsum_ctx *c = (const colsum_ctx *)p;
  double *acc = c->part + (int64_t)chunk * c->out;
  for (int64_t i = lo; i < hi; i++) {
    const float *r = c->dy + i * c->out;
    for (int64_t j = 0; j < c->out; j++) acc[j] += r[j];
  }
}

/* dst (out) += column sums of dy (N, out), in double. */
static int add_column_sums(const float *dy, int64_t N, int64_t out, float *dst) {
  const int64_t grain = GRAIN_FLOATS / out + 1;
  const int chunks = parallel_chunks(N, grain);
  double *part = (double *)calloc((size_t)(chunks * out), sizeof(double));
  if (!part) return 0;
  colsum_ctx c = {dy, part, out};
  parallel_for(N, grain, colsum_rows, &c);
  for (int64_t j = 0; j < out; j++) {
    double s = 0;
    for (int k = 0; k < chunks; k++) s += part[k * out + j];
    dst[j] += (float)s;
  }
  free(part);
  return 1;
}

/*
 * Given dy (N, out) and the forward's x (N, in) and xa (N, r), with xd = drop(x) (x without dropout):
 *   dx (N, in) = dy @ wᵀ [+ drop((scale · dy @ lbᵀ) @ laᵀ)]   (written, or added when accumulate_dx)
 *   dw += xᵀ @ dy, dbias += Σ_rows dy, dlb += scale · xaᵀ @ dy, dla += xdᵀ @ (scale · dy @ lbᵀ)
 * (each only where its accumulator exists; dx only when dx is not NULL).
 */
int linear_backward(const linear_t *lin, const float *x, const float *xa, const float *dy, int64_t N, float *dx,
                    int accumulate_dx, const lora_drop *drop) {
  const int64_t in = lin->w.rows, out = lin->w.cols;
  if (dx) blas_gemm(0, 1, N, in, out, dy, out, lin->w.data, lin->w.dtype, out, dx, in, accumulate_dx);
  if (lin->dw) blas_gemm(1, 0, in, out, N, x, in, dy, DT_F32, out, lin->dw, out, 1);
  if (lin->dbias && !add_column_sums(dy, N, out, lin->dbias)) return 0;
  if (lin->la) {
    const int64_t r = lin->rank;
    float *dxa = (float *)malloc((size_t)(N * r) * sizeof(float)); /* (N, r) */
    if (!dxa) return 0;
    blas_gemm(0, 1, N, r, out, dy, out, lin->lb, DT_F32, out, dxa, r, 0); /* dy @ lbᵀ */
    for (int64_t i = 0; i < N * r; i++) dxa[i] *= lin->scale;
    if (lin->dlb) { /* dlb (r, out) += scale · xaᵀ @ dy */
      float *xs = (float *)malloc((size_t)(N * r) * sizeof(float));
      if (!xs) {
        free(dxa);
        return 0;
      }
      for (int64_t i = 0; i < N * r; i++) xs[i] = xa[i] * lin->scale;
      blas_gemm(1, 0, r, out, N, xs, r, dy, DT_F32, out, lin->dlb, out, 1);
      free(xs);
    }
    if (dropping(lin, drop)) {
      float *t = (float *)malloc((size_t)(N * in) * sizeof(float)); /* (N, in): xd, then dxa @ laᵀ */
      if (!t) {
        free(dxa);
        return 0;
      }
      lora_drop_apply(drop, x, t, N, in, 0);
      if (lin->dla) blas_gemm(1, 0, in, r, N, t, in, dxa, DT_F32, r, lin->dla, r, 1); /* dla += xdᵀ @ dxa */
      if (dx) {
        blas_gemm(0, 1, N, in, r, dxa, r, lin->la, DT_F32, r, t, in, 0);
        lora_drop_apply(drop, t, dx, N, in, 1); /* dx += drop(dxa @ laᵀ) */
      }
      free(t);
      free(dxa);
      return 1;
    }
    if (lin->dla) blas_gemm(1, 0, in, r, N, x, in, dxa, DT_F32, r, lin->dla, r, 1); /* dla (in, r) += xᵀ @ dxa */
    if (dx) blas_gemm(0, 1, N, in, r, dxa, r, lin->la, DT_F32, r, dx, in, 1);        /* dx += dxa @ laᵀ */
    free(dxa);
  }
  return 1;
}

/* ------------------------------------------------------------------------------------------ */
/* Rotary embedding (rotate-half), in place on (N, heads, hd)                                  */
/* ------------------------------------------------------------------------------------------ */

typedef struct {
  float *x; /* (N, heads, hd) */
  const float *cos, *sin; /* (N, hd/2) */
  int64_t heads, hd;
  int inverse;
} rope_ctx;

/* forward: [x1, x2] -> [x1·c - x2·s, x2·c + x1·s]; inverse (its transpose, the gradient): s -> -s. */
ROW_LOOP static void rope_rows(void *p, int64_t lo, int64_t hi, int chunk) {
  (void)chunk;
  const rope_ctx *c = (const rope_ctx *)p;
  const int64_t half = c->hd / 2;
  for (int64_t i = lo; i < hi; i++) {
    const float *cr = c->cos + i * half, *sr = c->sin + i * half;
    for (int64_t h = 0; h < c->heads; h++) {
      float *x1 = c->x + (i * c->heads + h) * c->hd, *x2 = x1 + half;
      if (!c->inverse) {
        for (int64_t j = 0; j < half; j++) {
          const float a = x1[j], b = x2[j];
          x1[j] = a * cr[j] - b * sr[j];
          x2[j] = b * cr[j] + a * sr[j];
        }
      } else {
        for (int64_t j = 0; j < half; j++) {
          const float a = x1[j], b = x2[j];
          x1[j] = a * cr[j] + b * sr[j];
          x2[j] = b * cr[j] - a * sr[j];
        }
      }
    }
  }
}

void rope_apply(float *x, const float *cos, const float *sin, int64_t N, int64_t heads, int64_t hd, int inverse) {
  rope_ctx c = {x, cos, sin, heads, hd, inverse};
  parallel_for(N, GRAIN_FLOATS / (heads * hd) + 1, rope_rows, &c);
}

/* ------------------------------------------------------------------------------------------ */
/* Causal grouped-query attention                                                             */
/* ------------------------------------------------------------------------------------------ */

/*
 * Forward task t = (sequence, kv head j): the G query heads j·G .. j·G+G-1 of each of the
 * sequence's new tokens attend to the sequence's keys 0 .. their position. Keys and values of a
 * sequence are rows of (S, kv*hd) matrices: the pass's own k, v (training, scoring) or the
 * sequence's cache. A sequence with a parent (a shared prefix, model.h) reads its chain's keys and
 * values: its ancestors' rows of the pass's k, v and then its own, gathered for head j into
 * contiguous (S, hd) scratch.
 */
typedef struct {
  const model_t *m;
  const pass_t *p;
  int64_t layer;
  const float *q; /* (N, nh*hd) */
  const float *kact, *vact; /* (N, kv*hd): the pass's keys and values (training) */
  float *ctx;     /* (N, nh*hd) output */
  float *lse;     /* (N, nh) or NULL */
  /* backward */
  const float *dctx; /* (N, nh*hd) */
  float *dq;         /* (N, nh*hd) written */
  float *dk, *dv;    /* (N, kv*hd) written */
  const int64_t *order, *tree0; /* sequences by tree, and where each tree starts in order (backward) */
  int failed;
} attn_ctx;

/* The keys and values of one sequence for one kv head: S rows of hd floats, ld floats apart. */
typedef struct {
  const float *k, *v;
  int64_t ld;
} kv_view;

/* Query rows per block of the blocked attention: scores are (QB, S) floats per head. */
#define QB 64

/* The longest context among sequences [lo, hi). */
static int64_t seqs_smax(const pass_t *p, int64_t lo, int64_t hi) {
  int64_t smax = 1;
  for (int64_t s = lo; s < hi; s++)
    if (p->seqs[s].past + p->seqs[s].n > smax) smax = p->seqs[s].past + p->seqs[s].n;
  return smax;
}

/* Copies head j of sequence s's chain (its ancestors' rows, then its own) from src (N, kv*hd) of
 * the pass into dst (past + n, hd). Each member's rows go to its own positions past .. past+n-1. */
static void chain_gather(const attn_ctx *c, const seq_t *s, int64_t j, const float *src, float *dst) {
  const int64_t hd = c->m->hd, kvd = c->m->kv * hd;
  for (const seq_t *x = s;; x = &c->p->seqs[x->parent]) {
    for (int64_t i = 0; i < x->n; i++)
      memcpy(dst + (x->past + i) * hd, src + (x->row0 + i) * kvd + j * hd, (size_t)hd * sizeof(float));
    if (x->parent < 0) break;
  }
}

/* The reverse of chain_gather, adding: dst (N, kv*hd) += src (past + n, hd) at the chain's rows. */
static void chain_scatter_add(const attn_ctx *c, const seq_t *s, int64_t j, const float *src, float *dst) {
  const int64_t hd = c->m->hd, kvd = c->m->kv * hd;
  for (const seq_t *x = s;; x = &c->p->seqs[x->parent]) {
    for (int64_t i = 0; i < x->n; i++) {
      float *d = dst + (x->row0 + i) * kvd + j * hd;
      const float *r = src + (x->past + i) * hd;
      for (int64_t e = 0; e < hd; e++) d[e] += r[e];
    }
    if (x->parent < 0) break;
  }
}

/* Sequence s's keys and values of kv head j at layer `layer`: in place, or gathered into kbuf and
 * vbuf ((past + n, hd) each) when s continues a parent. */
static kv_view seq_kv(const attn_ctx *c, const seq_t *s, int64_t j, float *kbuf, float *vbuf) {
  const int64_t hd = c->m->hd, kvd = c->m->kv * hd;
  kv_view w;
  if (s->kv) {
    const float *base = s->kv + c->layer * 2 * s->cap * kvd;
    w.k = base + j * hd;
    w.v = base + s->cap * kvd + j * hd;
    w.ld = kvd;
  } else if (s->parent < 0) {
    w.k = c->kact + s->row0 * kvd + j * hd;
    w.v = c->vact + s->row0 * kvd + j * hd;
    w.ld = kvd;
  } else {
    chain_gather(c, s, j, c->kact, kbuf);
    chain_gather(c, s, j, c->vact, vbuf);
    w.k = kbuf;
    w.v = vbuf;
    w.ld = hd;
  }
  return w;
}

/*
 * Scores of a block of query rows i0 .. i0+bq-1 of head h against keys 0 .. S-1 (S = past + i0 + bq,
 * rows ldk floats apart), turned into attention weights: P (bq, S) = softmax over each row's visible
 * keys (0 .. past + i), exactly 0 past them. Row i's log-sum-exp goes to lse_out[i] when given; with
 * lse_in, the weights are exp(score - lse_in[i]) instead (the backward's recomputation).
 */
static int block_weights(const attn_ctx *c, const float *qr, const float *K, int64_t ldk, int64_t past, int64_t i0,
                         int64_t bq, int64_t S, float *P, float *lse_out, const float *lse_in) {
  const model_t *m = c->m;
  const int64_t qd = m->nh * m->hd, nh = m->nh;
  const float scale = 1.0f / sqrtf((float)m->hd);
  /* P (bq, S) = Q (bq, hd) @ K (S, hd)^T */
  if (!own_gemm_1t(0, 1, bq, S, m->hd, qr, qd, K, DT_F32, ldk, P, S, 0)) return 0;
  for (int64_t i = 0; i < bq; i++) {
    float *pr = P + i * S;
    const int64_t vis = past + i0 + i + 1;
    if (lse_in) {
      const float l = lse_in[i * nh];
      for (int64_t k = 0; k < vis; k++) pr[k] = exp_f32(pr[k] * scale - l);
    } else {
      float mx = -INFINITY, sum = 0.0f;
      for (int64_t k = 0; k < vis; k++) {
        pr[k] *= scale;
        mx = pr[k] > mx ? pr[k] : mx;
      }
      for (int64_t k = 0; k < vis; k++) {
        pr[k] = exp_f32(pr[k] - mx);
        sum += pr[k];
      }
      const float inv = 1.0f / sum;
      for (int64_t k = 0; k < vis; k++) pr[k] *= inv;
      if (lse_out) lse_out[i * nh] = mx + logf(sum);
    }
    for (int64_t k = vis; k < S; k++) pr[k] = 0.0f;
  }
  return 1;
}

/*
 * Forward, blocked: per head and block of query rows, P = softmax(Q K^T · scale) with the causal
 * mask, then ctx = P V, both products on the project's gemm (this task's thread alone).
 */
ROW_LOOP static void attn_fwd_tasks(void *arg, int64_t lo, int64_t hi, int chunk) {
  (void)chunk;
  attn_ctx *c = (attn_ctx *)arg;
  const model_t *m = c->m;
  const int64_t nh = m->nh, kvh = m->kv, hd = m->hd, G = nh / kvh, qd = nh * hd;
  const int64_t smax = seqs_smax(c->p, lo / kvh, (hi - 1) / kvh + 1);
  /* P (QB, S), then the gathered chain keys and values (S, hd) each */
  float *P = (float *)malloc((size_t)(QB + 2 * hd) * (size_t)smax * sizeof(float));
  if (!P) {
    c->failed = 1;
    return;
  }
  float *kbuf = P + QB * smax, *vbuf = kbuf + smax * hd;
  for (int64_t t = lo; t < hi && !c->failed; t++) {
    const seq_t *s = &c->p->seqs[t / kvh];
    const int64_t j = t % kvh;
    const kv_view w = seq_kv(c, s, j, kbuf, vbuf);
    for (int64_t g = 0; g < G; g++) {
      const int64_t h = j * G + g;
      for (int64_t i0 = 0; i0 < s->n; i0 += QB) {
        const int64_t bq = s->n - i0 < QB ? s->n - i0 : QB, S = s->past + i0 + bq, row = s->row0 + i0;
        float *lse = c->lse ? c->lse + row * nh + h : NULL;
        if (!block_weights(c, c->q + row * qd + h * hd, w.k, w.ld, s->past, i0, bq, S, P, lse, NULL) ||
            /* ctx (bq, hd) = P (bq, S) @ V (S, hd) */
            !own_gemm_1t(0, 0, bq, hd, S, P, S, w.v, DT_F32, w.ld, c->ctx + row * qd + h * hd, qd, 0))
          c->failed = 1;
      }
    }
  }
  free(P);
}

int attention_forward(const model_t *m, const pass_t *p, int64_t layer, const float *q, const float *k,
                      const float *v, float *ctx, float *lse) {
  attn_ctx c = {m, p, layer, q, k, v, ctx, lse, NULL, NULL, NULL, NULL, NULL, NULL, 0};
  parallel_for(p->nseq * m->kv, 1, attn_fwd_tasks, &c);
  return !c.failed;
}

/*
 * The backward of sequence s's queries at kv head j, blocked as the forward, with the weights P
 * recomputed from Q, K and the saved lse and D_i = dctx_i · ctx_i:
 *   dV += P^T dctx;  dP = dctx V^T;  dS = P ⊙ (dP - D) · scale;  dQ = dS K;  dK += dS^T Q.
 * K, V (w) and dK, dV (rows ld floats apart, as w's) cover the sequence's whole context (S rows);
 * P and dS are (QB, S) scratch.
 */
static int seq_attn_backward(const attn_ctx *c, const seq_t *s, int64_t j, kv_view w, float *dK, float *dV,
                             float *P, float *dS) {
  const model_t *m = c->m;
  const int64_t nh = m->nh, hd = m->hd, G = nh / m->kv, qd = nh * hd;
  const float scale = 1.0f / sqrtf((float)hd);
  for (int64_t g = 0; g < G; g++) {
    const int64_t h = j * G + g;
    for (int64_t i0 = 0; i0 < s->n; i0 += QB) {
      const int64_t bq = s->n - i0 < QB ? s->n - i0 : QB, S = s->past + i0 + bq, row = s->row0 + i0;
      const float *qr = c->q + row * qd + h * hd, *dor = c->dctx + row * qd + h * hd;
      int ok = block_weights(c, qr, w.k, w.ld, s->past, i0, bq, S, P, NULL, c->lse + row * nh + h);
      /* dV (S, hd) += P^T (S, bq) @ dctx (bq, hd);  dS (bq, S) = dctx (bq, hd) @ V^T (hd, S) */
      ok = ok && own_gemm_1t(1, 0, S, hd, bq, P, S, dor, DT_F32, qd, dV, w.ld, 1);
      ok = ok && own_gemm_1t(0, 1, bq, S, hd, dor, qd, w.v, DT_F32, w.ld, dS, S, 0);
      if (!ok) return 0;
      for (int64_t i = 0; i < bq; i++) {
        const float D = dot8(dor + i * qd, c->ctx + (row + i) * qd + h * hd, hd);
        float *dsr = dS + i * S;
        const float *pr = P + i * S;
        for (int64_t k = 0; k < S; k++) dsr[k] = pr[k] * (dsr[k] - D) * scale;
      }
      /* dQ (bq, hd) = dS (bq, S) @ K (S, hd);  dK (S, hd) += dS^T (S, bq) @ Q (bq, hd) */
      ok = own_gemm_1t(0, 0, bq, hd, S, dS, S, w.k, DT_F32, w.ld, c->dq + row * qd + h * hd, qd, 0);
      ok = ok && own_gemm_1t(1, 0, S, hd, bq, dS, S, qr, DT_F32, qd, dK, w.ld, 1);
      if (!ok) return 0;
    }
  }
  return 1;
}

/*
 * Backward task t = (tree, kv head j): a tree is a sequence without a parent and every sequence
 * that continues it, taken in index order (parents first), so that the dK, dV rows of the tree at
 * head j have one writer and add up in a fixed order. A sequence with a parent accumulates into
 * scratch over its whole chain, then adds that into its ancestors' rows and its own.
 */
ROW_LOOP static void attn_bwd_tasks(void *arg, int64_t lo, int64_t hi, int chunk) {
  (void)chunk;
  attn_ctx *c = (attn_ctx *)arg;
  const model_t *m = c->m;
  const int64_t kvh = m->kv, hd = m->hd, kvd = kvh * hd;
  const int64_t smax = seqs_smax(c->p, 0, c->p->nseq);
  /* P and dS (QB, S) each, then a chain's K, V, dK, dV (S, hd) each */
  float *P = (float *)malloc((size_t)(2 * QB + 4 * hd) * (size_t)smax * sizeof(float));
  if (!P) {
    c->failed = 1;
    return;
  }
  float *dS = P + QB * smax, *kbuf = dS + QB * smax, *vbuf = kbuf + smax * hd;
  float *dkbuf = vbuf + smax * hd, *dvbuf = dkbuf + smax * hd;
  for (int64_t t = lo; t < hi && !c->failed; t++) {
    const int64_t tree = t / kvh, j = t % kvh;
    const int64_t *members = c->order + c->tree0[tree], count = c->tree0[tree + 1] - c->tree0[tree];
    for (int64_t x = 0; x < count; x++) {
      const seq_t *s = &c->p->seqs[members[x]];
      for (int64_t i = 0; i < s->n; i++) {
        memset(c->dk + (s->row0 + i) * kvd + j * hd, 0, (size_t)hd * sizeof(float));
        memset(c->dv + (s->row0 + i) * kvd + j * hd, 0, (size_t)hd * sizeof(float));
      }
    }
    for (int64_t x = 0; x < count && !c->failed; x++) {
      const seq_t *s = &c->p->seqs[members[x]];
      const kv_view w = seq_kv(c, s, j, kbuf, vbuf);
      if (s->parent < 0) {
        if (!seq_attn_backward(c, s, j, w, c->dk + s->row0 * kvd + j * hd, c->dv + s->row0 * kvd + j * hd, P, dS))
          c->failed = 1;
        continue;
      }
      const int64_t S = s->past + s->n;
      memset(dkbuf, 0, (size_t)(S * hd) * sizeof(float));
      memset(dvbuf, 0, (size_t)(S * hd) * sizeof(float));
      if (!seq_attn_backward(c, s, j, w, dkbuf, dvbuf, P, dS)) c->failed = 1;
      chain_scatter_add(c, s, j, dkbuf, c->dk);
      chain_scatter_add(c, s, j, dvbuf, c->dv);
    }
  }
  free(P);
}

/* The pass's sequences grouped by tree: order (nseq) lists each tree's members in index order,
 * tree t's from tree0[t] to tree0[t + 1] (tree0: ntrees + 1). Returns the number of trees, or -1
 * when out of memory (*order then NULL). */
static int64_t group_trees(const pass_t *p, int64_t **order, int64_t **tree0) {
  const int64_t nseq = p->nseq;
  int64_t *buf = (int64_t *)malloc((size_t)(3 * nseq + 1) * sizeof(int64_t));
  *order = buf;
  if (!buf) return -1;
  int64_t *tree = buf + nseq, *start = buf + 2 * nseq; /* tree of each sequence; counts, then starts */
  int64_t ntrees = 0;
  for (int64_t s = 0; s < nseq; s++) tree[s] = p->seqs[s].parent < 0 ? ntrees++ : tree[p->seqs[s].parent];
  memset(start, 0, (size_t)(ntrees + 1) * sizeof(int64_t));
  for (int64_t s = 0; s < nseq; s++) start[tree[s] + 1]++;
  for (int64_t t = 0; t < ntrees; t++) start[t + 1] += start[t];
  /* start[t] serves as tree t's cursor, ending where tree t + 1 starts; then shifted back */
  for (int64_t s = 0; s < nseq; s++) buf[start[tree[s]]++] = s;
  for (int64_t t = ntrees; t > 0; t--) start[t] = start[t - 1];
  start[0] = 0;
  *tree0 = start;
  return ntrees;
}

int attention_backward(const model_t *m, const pass_t *p, const float *q, const float *k, const float *v,
                       const float *ctx, const float *lse, const float *dctx, float *dq, float *dk, float *dv) {
  int64_t *order, *tree0;
  const int64_t ntrees = group_trees(p, &order, &tree0);
  if (ntrees < 0) return 0;
  attn_ctx c = {m, p, 0, q, k, v, (float *)ctx, (float *)lse, dctx, dq, dk, dv, order, tree0, 0};
  parallel_for(ntrees * m->kv, 1, attn_bwd_tasks, &c);
  free(order);
  return !c.failed;
}

/* ------------------------------------------------------------------------------------------ */
/* SwiGLU: act = silu(gate) · up                                                              */
/* ------------------------------------------------------------------------------------------ */

typedef struct {
  const float *gate, *up; /* (n) */
  float *act;             /* (n) forward */
  const float *dact;      /* (n) backward */
  float *dgate, *dup;     /* (n) backward: written */
} swiglu_ctx;

ROW_LOOP static void swiglu_fwd_range(void *p, int64_t lo, int64_t hi, int chunk) {
  (void)chunk;
  const swiglu_ctx *c = (const swiglu_ctx *)p;
  for (int64_t i = lo; i < hi; i++) {
    const float g = c->gate[i];
    c->act[i] = (g * sigmoid_f32(g)) * c->up[i];
  }
}

void swiglu_forward(const float *gate, const float *up, float *act, int64_t n) {
  swiglu_ctx c = {gate, up, act, NULL, NULL, NULL};
  parallel_for(n, GRAIN_FLOATS, swiglu_fwd_range, &c);
}

/* With s = sigmoid(g): dup = dact·g·s; dgate = dact·u·s·(1 + g·(1 - s)). */
ROW_LOOP static void swiglu_bwd_range(void *p, int64_t lo, int64_t hi, int chunk) {
  (void)chunk;
  const swiglu_ctx *c = (const swiglu_ctx *)p;
  for (int64_t i = lo; i < hi; i++) {
    const float g = c->gate[i], u = c->up[i], d = c->dact[i];
    const float s = sigmoid_f32(g);
    c->dup[i] = d * (g * s);
    c->dgate[i] = d * u * s * (1.0f + g * (1.0f - s));
  }
}

void swiglu_backward(const float *gate, const float *up, const float *dact, float *dgate, float *dup, int64_t n) {
  swiglu_ctx c = {gate, up, NULL, dact, dgate, dup};
  parallel_for(n, GRAIN_FLOATS, swiglu_bwd_range, &c);
}

/* ------------------------------------------------------------------------------------------ */
/* Residual: y = a + b                                                                        */
/* ------------------------------------------------------------------------------------------ */

typedef struct {
  const float *a, *b;
  float *y;
} add_ctx;

static void add_range(void *p, int64_t lo, int64_t hi, int chunk) {
  (void)chunk;
  const add_ctx *c = (const add_ctx *)p;
  for (int64_t i = lo; i < hi; i++) c->y[i] = c->a[i] + c->b[i];
}

void residual_add(const float *a, const float *b, float *y, int64_t n) {
  add_ctx c = {a, b, y};
  parallel_for(n, GRAIN_FLOATS, add_range, &c);
}
