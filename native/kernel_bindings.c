/*
 * The bindings of the kernels the C engine calls from TypeScript (kernels/: optim.c, draw_rows.c),
 * one export table at the end of this file:
 *   adamwStep(w, g, m, v, wOut, mOut, vOut, n, lr, beta1, beta2, eps, weightDecay, bc1, bc2, gradScale)
 *   sumSquares(x) -> Σ x² (accumulated in double)
 *   drawTokens(logits[], temperatures, uniforms, tokens, logprobs): the sampler's untruncated
 *     draws, one token per row (kernels/draw_rows.h); a row holding NaN or +Infinity, or no
 *     finite logit, is an Error naming it (fail_draw)
 * Every argument is checked here (napi_args.h) before a kernel runs.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "napi_args.h"
#include "parallel.h"

#include "vec_math.h"
#include "kernels/draw_rows.h"
#include "kernels/optim.h"

/* ------------------------------------------------------------------------- */
/* AdamW and the squared norm                                                */
/* ------------------------------------------------------------------------- */

static napi_value adamw_step(napi_env env, napi_callback_info info) {
  static const char *fn = "adamwStep";
  size_t argc = 16;
  napi_value argv[16];
  CHECK_NAPI(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc < 16) return fail_type(env, "adamwStep(w, g, m, v, wOut, mOut, vOut, n, lr, beta1, beta2, eps, weightDecay, bc1, bc2, gradScale) needs 16 arguments");
  float *buf[7];
  int64_t len[7], n;
  static const char *names[7] = {"w", "g", "m", "v", "wOut", "mOut", "vOut"};
  for (int i = 0; i < 7; i++)
    if (!arg_f32(env, argv[i], fn, names[i], &buf[i], &len[i])) return NULL;
  if (!arg_dim(env, argv[7], fn, "n", &n)) return NULL;
  double h[8];
  static const char *hnames[8] = {"lr", "beta1", "beta2", "eps", "weightDecay", "bc1", "bc2", "gradScale"};
  for (int i = 0; i < 8; i++)
    if (!arg_number(env, argv[8 + i], fn, hnames[i], &h[i])) return NULL;
  for (int i = 0; i < 7; i++)
    if (!expect_len(env, fn, names[i], len[i], n, "n")) return NULL;
  adamw_update(buf[0], buf[1], buf[2], buf[3], buf[4], buf[5], buf[6], n, h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7]);
  return NULL;
}

static napi_value sum_squares_js(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1], out;
  CHECK_NAPI(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc < 1) return fail_type(env, "sumSquares(x) needs 1 argument");
  float *x;
  int64_t n;
  if (!arg_f32(env, argv[0], "sumSquares", "x", &x, &n)) return NULL;
  CHECK_NAPI(env, napi_create_double(env, sum_squares(x, n), &out));
  return out;
}

/* out (n) += src[offset .. offset + n), in float32. */
/*
 * Throws the Error of a row with nothing to draw from (draw_rows.h's codes):
 * "drawTokens: logits[3]: NaN at token 17; no token can be drawn from logits that are not finite",
 * with the row (row) and the words after "logits[3]: " (reason) as properties, so a caller can
 * name the sequence the row belongs to.
 */
static napi_value fail_draw(napi_env env, uint32_t row, int32_t code, int64_t col) {
  char reason[120], msg[240];
  if (code == DRAW_NAN)
    snprintf(reason, sizeof reason, "NaN at token %lld", (long long)col);
  else if (code == DRAW_INF)
    snprintf(reason, sizeof reason, "+Infinity at token %lld", (long long)col);
  else
    snprintf(reason, sizeof reason, "no finite value (every one is -Infinity)");
  snprintf(msg, sizeof msg, "drawTokens: logits[%u]: %s; no token can be drawn from logits that are not finite", row,
           reason);
  napi_value m, err, v;
  if (napi_create_string_utf8(env, msg, NAPI_AUTO_LENGTH, &m) != napi_ok || napi_create_error(env, NULL, m, &err) != napi_ok) {
    napi_throw_error(env, NULL, msg);
    return NULL;
  }
  if (napi_create_uint32(env, row, &v) == napi_ok) napi_set_named_property(env, err, "row", v);
  if (napi_create_string_utf8(env, reason, NAPI_AUTO_LENGTH, &v) == napi_ok) napi_set_named_property(env, err, "reason", v);
  napi_throw(env, err);
  return NULL;
}

/* drawTokens(logits[], temperatures, uniforms, tokens, logprobs): row i draws from softmax(logits[i]
 * / temperatures[i]) with uniforms[i] (draw_rows.h); every logits[i] has the same length. */
static napi_value draw_tokens(napi_env env, napi_callback_info info) {
  static const char *fn = "drawTokens";
  size_t argc = 5;
  napi_value argv[5];
  CHECK_NAPI(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc < 5) return fail_type(env, "drawTokens(logits, temperatures, uniforms, tokens, logprobs) needs 5 arguments");
  bool is_array = false;
  uint32_t rows = 0;
  CHECK_NAPI(env, napi_is_array(env, argv[0], &is_array));
  if (!is_array) return fail_type(env, "drawTokens: logits must be an array of Float32Array");
  CHECK_NAPI(env, napi_get_array_length(env, argv[0], &rows));
  double *temp, *u, *lp;
  int32_t *tok;
  int64_t tl, ul, kl, ll, cols = -1;
  if (!arg_f64(env, argv[1], fn, "temperatures", &temp, &tl) || !arg_f64(env, argv[2], fn, "uniforms", &u, &ul) ||
      !arg_i32_or_null(env, argv[3], fn, "tokens", &tok, &kl) || !arg_f64(env, argv[4], fn, "logprobs", &lp, &ll))
    return NULL;
  if (!tok) return fail_type(env, "drawTokens: tokens must be an Int32Array");
  if (!expect_len(env, fn, "temperatures", tl, rows, "rows") || !expect_len(env, fn, "uniforms", ul, rows, "rows") ||
      !expect_len(env, fn, "tokens", kl, rows, "rows") || !expect_len(env, fn, "logprobs", ll, rows, "rows"))
    return NULL;
  if (rows == 0) return NULL;
  const float **x = malloc(rows * sizeof *x);
  if (!x) return fail_range(env, "drawTokens: out of memory");
  for (uint32_t r = 0; r < rows; r++) {
    napi_value item;
    float *d;
    int64_t len;
    if (napi_get_element(env, argv[0], r, &item) != napi_ok || !arg_f32(env, item, fn, "logits[i]", &d, &len) ||
        (cols >= 0 && !expect_len(env, fn, "logits[i]", len, cols, "logits[0].length"))) {
      free(x);
      return NULL;
    }
    if (!(temp[r] > 0.0 && isfinite(temp[r])) || !(u[r] >= 0.0 && u[r] < 1.0)) {
      char msg[200];
      snprintf(msg, sizeof msg,
               "drawTokens: temperatures must be > 0 and finite, and uniforms in [0, 1) (row %u: temperature %g, uniform %g)",
               r, temp[r], u[r]);
      free(x);
      return fail_range(env, msg);
    }
    cols = len;
    x[r] = d;
  }
  if (cols == 0) {
    free(x);
    return fail_range(env, "drawTokens: logits (the vocabulary) must hold at least 1 float");
  }
  draw_ctx c = {x, temp, u, tok, lp, cols};
  parallel_for(rows, GRAIN_FLOATS / cols + 1, draw_rows, &c);
  free(x);
  for (uint32_t r = 0; r < rows; r++)
    if (tok[r] < 0) return fail_draw(env, r, tok[r], (int64_t)lp[r]);
  return NULL;
}

/* ------------------------------------------------------------------------- */

int register_kernel_bindings(napi_env env, napi_value exports) {
  napi_property_descriptor props[] = {
      {"adamwStep", NULL, adamw_step, NULL, NULL, NULL, napi_enumerable, NULL},
      {"sumSquares", NULL, sum_squares_js, NULL, NULL, NULL, napi_enumerable, NULL},
      {"drawTokens", NULL, draw_tokens, NULL, NULL, NULL, napi_enumerable, NULL},
  };
  return napi_define_properties(env, exports, sizeof props / sizeof props[0], props) == napi_ok;
}
