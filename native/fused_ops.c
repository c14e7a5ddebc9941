/*
 * agent-r1 native kernels: fused element-wise operations of the
 * decoder, each a forward and an explicit backward pass (as llm.c pairs them),
 * working on Float32Array views of the wasm heap without copying. The model
 * registers them as TF.js kernels (src/engine/local/fused-ops.ts), whose
 * reference compositions they replace; their float32 arithmetic follows those
 * compositions operation by operation (no fused multiply-add), so they differ
 * only in reduction order and in exp (a Cody-Waite + degree-6 polynomial
 * exp, within 1 ulp of exp computed in double over [-87, 88], measured).
 *
 * Exports (every length is checked; a wrong one raises a RangeError naming the argument):
 *   rmsNormForward(x, weight, y, rows, cols, eps)
 *   rmsNormBackward(x, weight, dy, dx, dweight, rows, cols, eps)
 *   softmaxForward(x, mask, y, rows, cols, scale, maskDiv, maskMod)
 *   softmaxBackward(y, dy, dx, rows, cols, scale)
 *   ropeForward(x, cos, sin, y, batch, seq, heads, headDim, tableRows, inverse)
 *   swigluForward(gate, up, y, n)
 *   swigluBackward(gate, up, dy, dgate, dup, n)
 *   biasAddForward(x, bias, y, rows, cols)
 *   sumRows(x, out, rows, cols)                 (the bias gradient: column sums)
 *   gatherRows(table, indices, out, rows, cols) (embedding lookup, any row gather)
 * Shapes are in the comments of each function. Rows are split across
 * fused_threads() threads (parallel.h) when there are enough of them.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "napi_args.h"
#include "parallel.h"

#include "vec_math.h"


/* ------------------------------------------------------------------------- */
/* RMSNorm: y = x · rsqrt(mean(x²) + eps) · weight, per row                  */
/* ------------------------------------------------------------------------- */

typedef struct {
  const float *x;  /* (rows, cols) */
  const float *w;  /* (cols) */
  const float *dy; /* (rows, cols); backward only */
  float *y;        /* (rows, cols): forward output */
  float *dx;       /* (rows, cols): backward output */
  double *dw_part; /* (chunks, cols): backward per-chunk partial sums of dweight */
  int64_t cols;
  float eps;
} rms_ctx;

/* rsqrt(mean(x²) + eps) of one row, in float32 as TF.js computes square, mean, add, rsqrt. */
static inline float rms_rstd(const float *xr, int64_t cols, float eps) {
  float ms = dot8(xr, xr, cols) / (float)cols;
  return 1.0f / sqrtf(ms + eps);
}

ROW_LOOP static void rms_fwd_rows(void *p, int64_t lo, int64_t hi, int chunk) {
  (void)chunk;
  const rms_ctx *c = (const rms_ctx *)p;
  const int64_t C = c->cols;
  for (int64_t r = lo; r < hi; r++) {
    const float *xr = c->x + r * C; /* (cols) */
    float *yr = c->y + r * C;       /* (cols) */
    const float rstd = rms_rstd(xr, C, c->eps);
    for (int64_t j = 0; j < C; j++) yr[j] = (xr[j] * rstd) * c->w[j];
  }
}

/*
 * With xn = x·s (s = rstd of the row) and y = xn·w:
 *   dweight[j] = Σ_rows dy[j]·xn[j]
 *   dx[j] = s·(dy[j]·w[j]) - x[j]·s³·(Σ_k dy[k]·w[k]·x[k]) / cols
 */
ROW_LOOP static void rms_bwd_rows(void *p, int64_t lo, int64_t hi, int chunk) {
  const rms_ctx *c = (const rms_ctx *)p;
  const int64_t C = c->cols;
  double *dw = c->dw_part + (int64_t)chunk * C; /* (cols) */
  for (int64_t r = lo; r < hi; r++) {
    const float *xr = c->x + r * C;   /* (cols) */
    const float *dyr = c->dy + r * C; /* (cols) */
    float *dxr = c->dx + r * C;       /* (cols): dy·w first, then dx */
    const float s = rms_rstd(xr, C, c->eps);
    for (int64_t j = 0; j < C; j++) {
      dxr[j] = dyr[j] * c->w[j];
      dw[j] += (double)(dyr[j] * (xr[j] * s));
    }
    const float k = s * s * s * dot8(dxr, xr, C) / (float)C;
    for (int64_t j = 0; j < C; j++) dxr[j] = s * dxr[j] - xr[j] * k;
  }
}

static napi_value rms_norm_forward(napi_env env, napi_callback_info info) {
  static const char *fn = "rmsNormForward";
  size_t argc = 6;
  napi_value argv[6];
  CHECK_NAPI(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc < 6) return fail_type(env, "rmsNormForward(x, weight, y, rows, cols, eps) needs 6 arguments");
  float *x, *w, *y;
  int64_t xl, wl, yl, rows, cols;
  double eps;
  if (!arg_f32(env, argv[0], fn, "x", &x, &xl) || !arg_f32(env, argv[1], fn, "weight", &w, &wl) ||
      !arg_f32(env, argv[2], fn, "y", &y, &yl) || !arg_dim(env, argv[3], fn, "rows", &rows) ||
      !arg_dim(env, argv[4], fn, "cols", &cols) || !arg_number(env, argv[5], fn, "eps", &eps))
    return NULL;
  const int64_t n = mul_dims(rows, cols);
  if (!expect_len(env, fn, "x", xl, n, "rows*cols") || !expect_len(env, fn, "weight", wl, cols, "cols") ||
      !expect_len(env, fn, "y", yl, n, "rows*cols"))
    return NULL;
  if (cols == 0) return NULL;
  rms_ctx c = {x, w, NULL, y, NULL, NULL, cols, (float)eps};
  parallel_for(rows, GRAIN_FLOATS / cols + 1, rms_fwd_rows, &c);
  return NULL;
}

static napi_value rms_norm_backward(napi_env env, napi_callback_info info) {
  static const char *fn = "rmsNormBackward";
  size_t argc = 8;
  napi_value argv[8];
  CHECK_NAPI(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc < 8) return fail_type(env, "rmsNormBackward(x, weight, dy, dx, dweight, rows, cols, eps) needs 8 arguments");
  float *x, *w, *dy, *dx, *dw;
  int64_t xl, wl, dyl, dxl, dwl, rows, cols;
  double eps;
  if (!arg_f32(env, argv[0], fn, "x", &x, &xl) || !arg_f32(env, argv[1], fn, "weight", &w, &wl) ||
      !arg_f32(env, argv[2], fn, "dy", &dy, &dyl) || !arg_f32(env, argv[3], fn, "dx", &dx, &dxl) ||
      !arg_f32(env, argv[4], fn, "dweight", &dw, &dwl) || !arg_dim(env, argv[5], fn, "rows", &rows) ||
      !arg_dim(env, argv[6], fn, "cols", &cols) || !arg_number(env, argv[7], fn, "eps", &eps))
    return NULL;
  const int64_t n = mul_dims(rows, cols);
  if (!expect_len(env, fn, "x", xl, n, "rows*cols") || !expect_len(env, fn, "weight", wl, cols, "cols") ||
      !expect_len(env, fn, "dy", dyl, n, "rows*cols") || !expect_len(env, fn, "dx", dxl, n, "rows*cols") ||
      !expect_len(env, fn, "dweight", dwl, cols, "cols"))
    return NULL;
  if (cols == 0) return NULL;
  const int64_t grain = GRAIN_FLOATS / cols + 1;
  const int chunks = parallel_chunks(rows, grain);
  double *part = (double *)calloc((size_t)(chunks * cols), sizeof(double)); /* (chunks, cols) */
  if (!part) {
    napi_throw_error(env, NULL, "rmsNormBackward: out of memory");
    return NULL;
  }
  rms_ctx c = {x, w, dy, NULL, dx, part, cols, (float)eps};
  parallel_for(rows, grain, rms_bwd_rows, &c);
  for (int64_t j = 0; j < cols; j++) {
    double s = 0;
    for (int k = 0; k < chunks; k++) s += part[k * cols + j];
    dw[j] = (float)s;
  }
  free(part);
  return NULL;
}

/* ------------------------------------------------------------------------- */
/* Softmax over the last axis of x·scale + mask                              */
/* ------------------------------------------------------------------------- */

typedef struct {
  const float *x;    /* (rows, cols) */
  const float *mask; /* (maskMod, cols) or NULL */
  const float *dy;   /* (rows, cols): backward */
  const float *y;    /* (rows, cols): the forward's probabilities, for the backward */
  float *out;        /* (rows, cols): y (forward) or dx (backward) */
  int64_t cols, mask_div, mask_mod;
  float scale;
} softmax_ctx;

/*
 * a[j] = exp(a[j] - m) in place. Blocks of 16 whose every entry lies below the
 * exp's underflow (masked keys, -1e9) are zeroed without evaluating it: about
 * half of a causal attention row.
 */
static inline void exp_shifted(float *a, int64_t n, float m) {
  const float under = m - 87.33654475f;
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    int live = 0;
    for (int l = 0; l < 16; l++) live |= a[j + l] >= under;
    if (live) {
      for (int l = 0; l < 16; l++) a[j + l] = exp_f32(a[j + l] - m);
    } else {
      for (int l = 0; l < 16; l++) a[j + l] = 0.0f;
    }
  }
  for (; j < n; j++) a[j] = exp_f32(a[j] - m);
}

/* y[r] = softmax(x[r]·scale + mask[(r / maskDiv) % maskMod]); like TF.js (XNNPACK): subtract the max, exp, times 1 / sum. */
ROW_LOOP static void softmax_fwd_rows(void *p, int64_t lo, int64_t hi, int chunk) {
  (void)chunk;
  const softmax_ctx *c = (const softmax_ctx *)p;
  const int64_t C = c->cols;
  const float scale = c->scale;
  for (int64_t r = lo; r < hi; r++) {
    const float *xr = c->x + r * C; /* (cols) */
    float *yr = c->out + r * C;     /* (cols): logits, then exp, then probabilities */
    if (c->mask) {
      const float *mr = c->mask + ((r / c->mask_div) % c->mask_mod) * C; /* (cols) */
      for (int64_t j = 0; j < C; j++) yr[j] = xr[j] * scale + mr[j];
    } else {
      for (int64_t j = 0; j < C; j++) yr[j] = xr[j] * scale;
    }
    const float m = max8(yr, C);
    exp_shifted(yr, C, m);
    const float inv = 1.0f / sum8(yr, C);
    for (int64_t j = 0; j < C; j++) yr[j] = yr[j] * inv;
  }
}

/* dx = (dy·y - Σ(dy·y)·y)·scale (TF.js's softmax gradient, then the scale's). */
ROW_LOOP static void softmax_bwd_rows(void *p, int64_t lo, int64_t hi, int chunk) {
  (void)chunk;
  const softmax_ctx *c = (const softmax_ctx *)p;
  const int64_t C = c->cols;
  const float scale = c->scale;
  for (int64_t r = lo; r < hi; r++) {
    const float *yr = c->y + r * C;   /* (cols) */
    const float *dyr = c->dy + r * C; /* (cols) */
    float *dxr = c->out + r * C;      /* (cols) */
    const float s = dot8(dyr, yr, C);
    for (int64_t j = 0; j < C; j++) dxr[j] = (dyr[j] * yr[j] - s * yr[j]) * scale;
  }
}

static napi_value softmax_forward(napi_env env, napi_callback_info info) {
  static const char *fn = "softmaxForward";
  size_t argc = 8;
  napi_value argv[8];
  CHECK_NAPI(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc < 8) return fail_type(env, "softmaxForward(x, mask, y, rows, cols, scale, maskDiv, maskMod) needs 8 arguments");
  float *x, *mask, *y;
  int64_t xl, ml, yl, rows, cols, mdiv, mmod;
  double scale;
  if (!arg_f32(env, argv[0], fn, "x", &x, &xl) || !arg_f32_or_null(env, argv[1], fn, "mask", &mask, &ml) ||
      !arg_f32(env, argv[2], fn, "y", &y, &yl) || !arg_dim(env, argv[3], fn, "rows", &rows) ||
      !arg_dim(env, argv[4], fn, "cols", &cols) || !arg_number(env, argv[5], fn, "scale", &scale) ||
      !arg_dim(env, argv[6], fn, "maskDiv", &mdiv) || !arg_dim(env, argv[7], fn, "maskMod", &mmod))
    return NULL;
  const int64_t n = mul_dims(rows, cols);
  if (!expect_len(env, fn, "x", xl, n, "rows*cols") || !expect_len(env, fn, "y", yl, n, "rows*cols")) return NULL;
  if (mask) {
    if (mdiv < 1) return fail_range(env, "softmaxForward: maskDiv must be at least 1");
    if (mmod < 1) return fail_range(env, "softmaxForward: maskMod must be at least 1");
    if (!expect_len(env, fn, "mask", ml, mul_dims(mmod, cols), "maskMod*cols")) return NULL;
  }
  if (cols == 0) return NULL;
  softmax_ctx c = {x, mask, NULL, NULL, y, cols, mdiv, mmod, (float)scale};
  parallel_for(rows, GRAIN_FLOATS / cols + 1, softmax_fwd_rows, &c);
  return NULL;
}

static napi_value softmax_backward(napi_env env, napi_callback_info info) {
  static const char *fn = "softmaxBackward";
  size_t argc = 6;
  napi_value argv[6];
  CHECK_NAPI(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc < 6) return fail_type(env, "softmaxBackward(y, dy, dx, rows, cols, scale) needs 6 arguments");
  float *y, *dy, *dx;
  int64_t yl, dyl, dxl, rows, cols;
  double scale;
  if (!arg_f32(env, argv[0], fn, "y", &y, &yl) || !arg_f32(env, argv[1], fn, "dy", &dy, &dyl) ||
      !arg_f32(env, argv[2], fn, "dx", &dx, &dxl) || !arg_dim(env, argv[3], fn, "rows", &rows) ||
      !arg_dim(env, argv[4], fn, "cols", &cols) || !arg_number(env, argv[5], fn, "scale", &scale))
    return NULL;
  const int64_t n = mul_dims(rows, cols);
  if (!expect_len(env, fn, "y", yl, n, "rows*cols") || !expect_len(env, fn, "dy", dyl, n, "rows*cols") ||
      !expect_len(env, fn, "dx", dxl, n, "rows*cols"))
    return NULL;
  if (cols == 0) return NULL;
  softmax_ctx c = {NULL, NULL, dy, y, dx, cols, 1, 1, (float)scale};
  parallel_for(rows, GRAIN_FLOATS / cols + 1, softmax_bwd_rows, &c);
  return NULL;
}

/* ------------------------------------------------------------------------- */
/* Rotary embedding, rotate-half form                                        */
/* ------------------------------------------------------------------------- */

typedef struct {
  const float *x;   /* (batch, seq, heads, headDim) */
  const float *cos; /* (tableRows, seq, headDim/2) */
  const float *sin; /* (tableRows, seq, headDim/2) */
  float *y;         /* (batch, seq, heads, headDim) */
  int64_t seq, heads, hd, table_rows;
  int inverse;
} rope_ctx;

/*
 * For each (b, t) item: with x = [x1 | x2] (halves of the head dim), c, s the
 * table entries of row (tableRows == 1 ? 0 : b), position t:
 *   forward:  y = [x1·c - x2·s | x2·c + x1·s]
 *   inverse:  y = [x1·c + x2·s | x2·c - x1·s]   (the transpose: the gradient of forward)
 */
ROW_LOOP static void rope_items(void *p, int64_t lo, int64_t hi, int chunk) {
  (void)chunk;
  const rope_ctx *c = (const rope_ctx *)p;
  const int64_t half = c->hd / 2, H = c->heads, hd = c->hd;
  for (int64_t it = lo; it < hi; it++) { /* it = b·seq + t */
    const int64_t b = it / c->seq, t = it % c->seq;
    const int64_t trow = (c->table_rows == 1 ? 0 : b) * c->seq + t;
    const float *cr = c->cos + trow * half; /* (half) */
    const float *sr = c->sin + trow * half; /* (half) */
    for (int64_t h = 0; h < H; h++) {
      const float *x1 = c->x + (it * H + h) * hd, *x2 = x1 + half; /* (half) each */
      float *y1 = c->y + (it * H + h) * hd, *y2 = y1 + half;       /* (half) each */
      if (!c->inverse) {
        for (int64_t i = 0; i < half; i++) {
          y1[i] = x1[i] * cr[i] - x2[i] * sr[i];
          y2[i] = x2[i] * cr[i] + x1[i] * sr[i];
        }
      } else {
        for (int64_t i = 0; i < half; i++) {
          y1[i] = x1[i] * cr[i] + x2[i] * sr[i];
          y2[i] = x2[i] * cr[i] - x1[i] * sr[i];
        }
      }
    }
  }
}

static napi_value rope_forward(napi_env env, napi_callback_info info) {
  static const char *fn = "ropeForward";
  size_t argc = 10;
  napi_value argv[10];
  CHECK_NAPI(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc < 10) return fail_type(env, "ropeForward(x, cos, sin, y, batch, seq, heads, headDim, tableRows, inverse) needs 10 arguments");
  float *x, *cs, *sn, *y;
  int64_t xl, cl, sl, yl, batch, seq, heads, hd, trows;
  int inverse;
  if (!arg_f32(env, argv[0], fn, "x", &x, &xl) || !arg_f32(env, argv[1], fn, "cos", &cs, &cl) ||
      !arg_f32(env, argv[2], fn, "sin", &sn, &sl) || !arg_f32(env, argv[3], fn, "y", &y, &yl) ||
      !arg_dim(env, argv[4], fn, "batch", &batch) || !arg_dim(env, argv[5], fn, "seq", &seq) ||
      !arg_dim(env, argv[6], fn, "heads", &heads) || !arg_dim(env, argv[7], fn, "headDim", &hd) ||
      !arg_dim(env, argv[8], fn, "tableRows", &trows) || !arg_flag(env, argv[9], fn, "inverse", &inverse))
    return NULL;
  char msg[200];
  if (hd % 2 != 0) {
    snprintf(msg, sizeof msg, "ropeForward: headDim must be even, got %lld", (long long)hd);
    return fail_range(env, msg);
  }
  if (trows != 1 && trows != batch) {
    snprintf(msg, sizeof msg, "ropeForward: tableRows must be 1 or batch = %lld, got %lld", (long long)batch, (long long)trows);
    return fail_range(env, msg);
  }
  const int64_t items = mul_dims(batch, seq), n = mul_dims(mul_dims(items, heads), hd);
  const int64_t tn = mul_dims(mul_dims(trows, seq), hd / 2);
  if (!expect_len(env, fn, "x", xl, n, "batch*seq*heads*headDim") || !expect_len(env, fn, "y", yl, n, "batch*seq*heads*headDim") ||
      !expect_len(env, fn, "cos", cl, tn, "tableRows*seq*headDim/2") || !expect_len(env, fn, "sin", sl, tn, "tableRows*seq*headDim/2"))
    return NULL;
  if (n == 0) return NULL;
  rope_ctx c = {x, cs, sn, y, seq, heads, hd, trows, inverse};
  parallel_for(items, GRAIN_FLOATS / (heads * hd) + 1, rope_items, &c);
  return NULL;
}

/* ------------------------------------------------------------------------- */
/* SwiGLU: y = silu(gate) · up = (gate · sigmoid(gate)) · up                 */
/* ------------------------------------------------------------------------- */

typedef struct {
  const float *gate; /* (n) */
  const float *up;   /* (n) */
  const float *dy;   /* (n): backward */
  float *y;          /* (n): forward output */
  float *dgate;      /* (n): backward output */
  float *dup;        /* (n): backward output */
} swiglu_ctx;

ROW_LOOP static void swiglu_fwd_range(void *p, int64_t lo, int64_t hi, int chunk) {
  (void)chunk;
  const swiglu_ctx *c = (const swiglu_ctx *)p;
  for (int64_t i = lo; i < hi; i++) {
    const float g = c->gate[i];
    c->y[i] = (g * sigmoid_f32(g)) * c->up[i];
  }
}

/*
 * As TF.js differentiates (g·s)·u with s = sigmoid(g):
 *   da = dy·u, dup = dy·(g·s), dgate = da·s + (da·g)·(s·(1 - s)).
 */
ROW_LOOP static void swiglu_bwd_range(void *p, int64_t lo, int64_t hi, int chunk) {
  (void)chunk;
  const swiglu_ctx *c = (const swiglu_ctx *)p;
  for (int64_t i = lo; i < hi; i++) {
    const float g = c->gate[i], u = c->up[i], d = c->dy[i];
    const float s = sigmoid_f32(g);
    const float da = d * u;
    c->dup[i] = d * (g * s);
    c->dgate[i] = da * s + (da * g) * (s * (1.0f - s));
  }
}

static napi_value swiglu_forward(napi_env env, napi_callback_info info) {
  static const char *fn = "swigluForward";
  size_t argc = 4;
  napi_value argv[4];
  CHECK_NAPI(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc < 4) return fail_type(env, "swigluForward(gate, up, y, n) needs 4 arguments");
  float *g, *u, *y;
  int64_t gl, ul, yl, n;
  if (!arg_f32(env, argv[0], fn, "gate", &g, &gl) || !arg_f32(env, argv[1], fn, "up", &u, &ul) ||
      !arg_f32(env, argv[2], fn, "y", &y, &yl) || !arg_dim(env, argv[3], fn, "n", &n))
    return NULL;
  if (!expect_len(env, fn, "gate", gl, n, "n") || !expect_len(env, fn, "up", ul, n, "n") || !expect_len(env, fn, "y", yl, n, "n"))
    return NULL;
  swiglu_ctx c = {g, u, NULL, y, NULL, NULL};
  parallel_for(n, GRAIN_FLOATS, swiglu_fwd_range, &c);
  return NULL;
}

static napi_value swiglu_backward(napi_env env, napi_callback_info info) {
  static const char *fn = "swigluBackward";
  size_t argc = 6;
  napi_value argv[6];
  CHECK_NAPI(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc < 6) return fail_type(env, "swigluBackward(gate, up, dy, dgate, dup, n) needs 6 arguments");
  float *g, *u, *dy, *dg, *du;
  int64_t gl, ul, dyl, dgl, dul, n;
  if (!arg_f32(env, argv[0], fn, "gate", &g, &gl) || !arg_f32(env, argv[1], fn, "up", &u, &ul) ||
      !arg_f32(env, argv[2], fn, "dy", &dy, &dyl) || !arg_f32(env, argv[3], fn, "dgate", &dg, &dgl) ||
      !arg_f32(env, argv[4], fn, "dup", &du, &dul) || !arg_dim(env, argv[5], fn, "n", &n))
    return NULL;
  if (!expect_len(env, fn, "gate", gl, n, "n") || !expect_len(env, fn, "up", ul, n, "n") || !expect_len(env, fn, "dy", dyl, n, "n") ||
      !expect_len(env, fn, "dgate", dgl, n, "n") || !expect_len(env, fn, "dup", dul, n, "n"))
    return NULL;
  swiglu_ctx c = {g, u, dy, NULL, dg, du};
  parallel_for(n, GRAIN_FLOATS, swiglu_bwd_range, &c);
  return NULL;
}

/* ------------------------------------------------------------------------- */
/* Bias add and its gradient; row gather                                     */
/* ------------------------------------------------------------------------- */

/* y (rows, cols) = x (rows, cols) + bias (cols). */
ROW_LOOP static void bias_add_rows(const float *x, const float *b, float *y, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; r++)
    for (int64_t j = 0; j < cols; j++) y[r * cols + j] = x[r * cols + j] + b[j];
}

/* out (cols) = Σ_r x (rows, cols)[r], accumulated in double (acc: (cols) scratch). */
ROW_LOOP static void sum_rows(const float *x, double *acc, float *out, int64_t rows, int64_t cols) {
  for (int64_t j = 0; j < cols; j++) acc[j] = 0;
  for (int64_t r = 0; r < rows; r++)
    for (int64_t j = 0; j < cols; j++) acc[j] += (double)x[r * cols + j];
  for (int64_t j = 0; j < cols; j++) out[j] = (float)acc[j];
}

static napi_value bias_add_forward(napi_env env, napi_callback_info info) {
  static const char *fn = "biasAddForward";
  size_t argc = 5;
  napi_value argv[5];
  CHECK_NAPI(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc < 5) return fail_type(env, "biasAddForward(x, bias, y, rows, cols) needs 5 arguments");
  float *x, *b, *y;
  int64_t xl, bl, yl, rows, cols;
  if (!arg_f32(env, argv[0], fn, "x", &x, &xl) || !arg_f32(env, argv[1], fn, "bias", &b, &bl) ||
      !arg_f32(env, argv[2], fn, "y", &y, &yl) || !arg_dim(env, argv[3], fn, "rows", &rows) ||
      !arg_dim(env, argv[4], fn, "cols", &cols))
    return NULL;
  const int64_t n = mul_dims(rows, cols);
  if (!expect_len(env, fn, "x", xl, n, "rows*cols") || !expect_len(env, fn, "bias", bl, cols, "cols") ||
      !expect_len(env, fn, "y", yl, n, "rows*cols"))
    return NULL;
  bias_add_rows(x, b, y, rows, cols);
  return NULL;
}

static napi_value sum_rows_js(napi_env env, napi_callback_info info) {
  static const char *fn = "sumRows";
  size_t argc = 4;
  napi_value argv[4];
  CHECK_NAPI(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc < 4) return fail_type(env, "sumRows(x, out, rows, cols) needs 4 arguments");
  float *x, *out;
  int64_t xl, ol, rows, cols;
  if (!arg_f32(env, argv[0], fn, "x", &x, &xl) || !arg_f32(env, argv[1], fn, "out", &out, &ol) ||
      !arg_dim(env, argv[2], fn, "rows", &rows) || !arg_dim(env, argv[3], fn, "cols", &cols))
    return NULL;
  if (!expect_len(env, fn, "x", xl, mul_dims(rows, cols), "rows*cols") || !expect_len(env, fn, "out", ol, cols, "cols")) return NULL;
  if (cols == 0) return NULL;
  double *acc = (double *)malloc((size_t)cols * sizeof(double)); /* (cols) */
  if (!acc) {
    napi_throw_error(env, NULL, "sumRows: out of memory");
    return NULL;
  }
  sum_rows(x, acc, out, rows, cols);
  free(acc);
  return NULL;
}

/* out (n, cols) = table (rows, cols)[indices (n)]; every index is checked first. */
static napi_value gather_rows(napi_env env, napi_callback_info info) {
  static const char *fn = "gatherRows";
  size_t argc = 5;
  napi_value argv[5];
  CHECK_NAPI(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc < 5) return fail_type(env, "gatherRows(table, indices, out, rows, cols) needs 5 arguments");
  float *t, *out;
  int32_t *idx;
  int64_t tl, il, ol, rows, cols;
  if (!arg_f32(env, argv[0], fn, "table", &t, &tl) || !arg_i32_or_null(env, argv[1], fn, "indices", &idx, &il) ||
      !arg_f32(env, argv[2], fn, "out", &out, &ol) || !arg_dim(env, argv[3], fn, "rows", &rows) ||
      !arg_dim(env, argv[4], fn, "cols", &cols))
    return NULL;
  if (!idx) return fail_type(env, "gatherRows: indices must be an Int32Array");
  if (!expect_len(env, fn, "table", tl, mul_dims(rows, cols), "rows*cols") ||
      !expect_len(env, fn, "out", ol, mul_dims(il, cols), "indices.length*cols"))
    return NULL;
  for (int64_t i = 0; i < il; i++) {
    if (idx[i] < 0 || idx[i] >= rows) {
      char msg[200];
      snprintf(msg, sizeof msg, "gatherRows: indices[%lld] = %d is outside [0, %lld)", (long long)i, (int)idx[i], (long long)rows);
      return fail_range(env, msg);
    }
  }
  for (int64_t i = 0; i < il; i++) memcpy(out + i * cols, t + (int64_t)idx[i] * cols, (size_t)cols * sizeof(float));
  return NULL;
}

/* ------------------------------------------------------------------------- */

int register_fused_ops(napi_env env, napi_value exports) {
  napi_property_descriptor props[] = {
      {"rmsNormForward", NULL, rms_norm_forward, NULL, NULL, NULL, napi_enumerable, NULL},
      {"rmsNormBackward", NULL, rms_norm_backward, NULL, NULL, NULL, napi_enumerable, NULL},
      {"softmaxForward", NULL, softmax_forward, NULL, NULL, NULL, napi_enumerable, NULL},
      {"softmaxBackward", NULL, softmax_backward, NULL, NULL, NULL, napi_enumerable, NULL},
      {"ropeForward", NULL, rope_forward, NULL, NULL, NULL, napi_enumerable, NULL},
      {"swigluForward", NULL, swiglu_forward, NULL, NULL, NULL, napi_enumerable, NULL},
      {"swigluBackward", NULL, swiglu_backward, NULL, NULL, NULL, napi_enumerable, NULL},
      {"biasAddForward", NULL, bias_add_forward, NULL, NULL, NULL, napi_enumerable, NULL},
      {"sumRows", NULL, sum_rows_js, NULL, NULL, NULL, napi_enumerable, NULL},
      {"gatherRows", NULL, gather_rows, NULL, NULL, NULL, napi_enumerable, NULL},
  };
  return napi_define_properties(env, exports, sizeof props / sizeof props[0], props) == napi_ok;
}
