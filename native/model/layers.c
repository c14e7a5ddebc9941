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
 * Task t = (sequence, kv head j): the G query heads j·G .. j·G+G-1 of each of the sequence's
 * new tokens attend to the sequence's keys 0 .. their position. Keys and values of a sequence
 * are rows of (S, kv*hd) matrices: the pass's own k, v (training) or the sequence's cache.
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
  int failed;
} attn_ctx;

/* Keys and values of sequence s at layer l: (S, kv*hd) each. */
static void seq_kv(const attn_ctx *c, const seq_t *s, const float **k, const float **v) {
  const int64_t kvd = c->m->kv * c->m->hd;
  if (s->kv) {
    const float *base = s->kv + c->layer * 2 * s->cap * kvd;
    *k = base;
    *v = base + s->cap * kvd;
  } else {
    *k = c->kact + s->row0 * kvd;
    *v = c->vact + s->row0 * kvd;
  }
}

/* Query rows per block of the blocked attention: scores are (QB, S) floats per head. */
#define QB 64

/* The longest context among tasks [lo, hi). */
static int64_t tasks_smax(const attn_ctx *c, int64_t lo, int64_t hi) {
  int64_t smax = 1;
  for (int64_t t = lo; t < hi; t++) {
    const seq_t *s = &c->p->seqs[t / c->m->kv];
    if (s->past + s->n > smax) smax = s->past + s->n;
  }
  return smax;
}

/*
 * Scores of a block of query rows i0 .. i0+bq-1 of head h against keys 0 .. S-1 (S = past + i0 + bq),
 * turned into attention weights: P (bq, S) = softmax over each row's visible keys (0 .. past + i),
 * exactly 0 past them. Row i's log-sum-exp goes to lse_out[i] when given; with lse_in, the weights
 * are exp(score - lse_in[i]) instead (the backward's recomputation).
 */
static int block_weights(const attn_ctx *c, const float *qr, const float *K, int64_t past, int64_t i0, int64_t bq,
                         int64_t S, float *P, float *lse_out, const float *lse_in) {
  const model_t *m = c->m;
  const int64_t kvd = m->kv * m->hd, qd = m->nh * m->hd, nh = m->nh;
  const float scale = 1.0f / sqrtf((float)m->hd);
  /* P (bq, S) = Q (bq, hd) @ K (S, hd)^T */
  if (!own_gemm_1t(0, 1, bq, S, m->hd, qr, qd, K, DT_F32, kvd, P, S, 0)) return 0;
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
  const int64_t nh = m->nh, kvh = m->kv, hd = m->hd, G = nh / kvh, kvd = kvh * hd, qd = nh * hd;
  float *P = (float *)malloc((size_t)QB * (size_t)tasks_smax(c, lo, hi) * sizeof(float)); /* (QB, S) */
  if (!P) {
    c->failed = 1;
    return;
  }
  for (int64_t t = lo; t < hi && !c->failed; t++) {
    const seq_t *s = &c->p->seqs[t / kvh];
    const int64_t j = t % kvh;
    const float *K, *Vv;
    seq_kv(c, s, &K, &Vv);
    for (int64_t g = 0; g < G; g++) {
      const int64_t h = j * G + g;
      for (int64_t i0 = 0; i0 < s->n; i0 += QB) {
        const int64_t bq = s->n - i0 < QB ? s->n - i0 : QB, S = s->past + i0 + bq, row = s->row0 + i0;
        float *lse = c->lse ? c->lse + row * nh + h : NULL;
        if (!block_weights(c, c->q + row * qd + h * hd, K + j * hd, s->past, i0, bq, S, P, lse, NULL) ||
            /* ctx (bq, hd) = P (bq, S) @ V (S, hd) */
            !own_gemm_1t(0, 0, bq, hd, S, P, S, Vv + j * hd, DT_F32, kvd, c->ctx + row * qd + h * hd, qd, 0))
          c->failed = 1;
      }
    }
  }
  free(P);
}

int attention_forward(const model_t *m, const pass_t *p, int64_t layer, const float *q, const float *k,
                      const float *v, float *ctx, float *lse) {
  attn_ctx c = {m, p, layer, q, k, v, ctx, lse, NULL, NULL, NULL, NULL, 0};
  parallel_for(p->nseq * m->kv, 1, attn_fwd_tasks, &c);
  return !c.failed;
}

/*
 * Backward, blocked the same way, with the weights P recomputed from Q, K and the saved lse and
 * D_i = dctx_i · ctx_i:
 *   dV += P^T dctx;  dP = dctx V^T;  dS = P ⊙ (dP - D) · scale;  dQ = dS K;  dK += dS^T Q.
 * A task owns its kv head's dK, dV rows, so no two tasks write the same entry.
 */
ROW_LOOP static void attn_bwd_tasks(void *arg, int64_t lo, int64_t hi, int chunk) {
  (void)chunk;
  attn_ctx *c = (attn_ctx *)arg;
  const model_t *m = c->m;
  const int64_t nh = m->nh, kvh = m->kv, hd = m->hd, G = nh / kvh, kvd = kvh * hd, qd = nh * hd;
  const float scale = 1.0f / sqrtf((float)hd);
  const int64_t smax = tasks_smax(c, lo, hi);
  float *P = (float *)malloc((size_t)2 * QB * (size_t)smax * sizeof(float)); /* P and dS, (QB, S) each */
  if (!P) {
    c->failed = 1;
    return;
  }
  float *dS = P + QB * smax;
  for (int64_t t = lo; t < hi && !c->failed; t++) {
    const seq_t *s = &c->p->seqs[t / kvh];
    const int64_t j = t % kvh;
    const float *K = c->kact + s->row0 * kvd + j * hd, *Vv = c->vact + s->row0 * kvd + j * hd;
    float *dK = c->dk + s->row0 * kvd + j * hd, *dV = c->dv + s->row0 * kvd + j * hd;
    for (int64_t i = 0; i < s->n; i++) {
      memset(dK + i * kvd, 0, (size_t)hd * sizeof(float));
      memset(dV + i * kvd, 0, (size_t)hd * sizeof(float));
    }
    for (int64_t g = 0; g < G; g++) {
      const int64_t h = j * G + g;
      for (int64_t i0 = 0; i0 < s->n; i0 += QB) {
        const int64_t bq = s->n - i0 < QB ? s->n - i0 : QB, S = i0 + bq, row = s->row0 + i0;
        const float *qr = c->q + row * qd + h * hd, *dor = c->dctx + row * qd + h * hd;
        int ok = block_weights(c, qr, K, 0, i0, bq, S, P, NULL, c->lse + row * nh + h);
        /* dV (S, hd) += P^T (S, bq) @ dctx (bq, hd);  dS (bq, S) = dctx (bq, hd) @ V^T (hd, S) */
        ok = ok && own_gemm_1t(1, 0, S, hd, bq, P, S, dor, DT_F32, qd, dV, kvd, 1);
        ok = ok && own_gemm_1t(0, 1, bq, S, hd, dor, qd, Vv, DT_F32, kvd, dS, S, 0);
        if (!ok) {
          c->failed = 1;
          break;
        }
        for (int64_t i = 0; i < bq; i++) {
          const float D = dot8(dor + i * qd, c->ctx + (row + i) * qd + h * hd, hd);
          float *dsr = dS + i * S;
          const float *pr = P + i * S;
          for (int64_t k = 0; k < S; k++) dsr[k] = pr[k] * (dsr[k] - D) * scale;
        }
        /* dQ (bq, hd) = dS (bq, S) @ K (S, hd);  dK (S, hd) += dS^T (S, bq) @ Q (bq, hd) */
        ok = own_gemm_1t(0, 0, bq, hd, S, dS, S, K, DT_F32, kvd, c->dq + row * qd + h * hd, qd, 0);
        ok = ok && own_gemm_1t(1, 0, S, hd, bq, dS, S, qr, DT_F32, qd, dK, kvd, 1);
        if (!ok) c->failed = 1;
      }
    }
  }
  free(P);
}

int attention_backward(const model_t *m, const pass_t *p, const float *q, const float *k, const float *v,
                       const float *ctx, const float *lse, const float *dctx, float *dq, float *dk, float *dv) {
  attn_ctx c = {m, p, 0, q, k, v, (float *)ctx, (float *)lse, dctx, dq, dk, dv, 0};
  parallel_for(p->nseq * m->kv, 1, attn_bwd_tasks, &c);
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
