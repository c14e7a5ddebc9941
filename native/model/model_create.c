/*
 * modelCreate (model_napi.c lists its arguments): a model_t over the arrays JavaScript holds, every
 * length checked against the dims, with a reference kept to each array it points into.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../napi_args.h"
#include "model_js.h"

#define SLOTS_GLOBAL 4
#define SLOTS_LAYER 18
enum { S_EMBED, S_HEAD, S_NORM, S_SCORE };
enum { SL_LN1, SL_LN2, SL_W, SL_B = SL_W + LIN_COUNT, SL_QN = SL_B + LIN_COUNT, SL_KN };

static void model_finalize(napi_env env, void *data, void *hint) {
  (void)hint;
  model_box *b = (model_box *)data;
  for (size_t i = 0; i < b->nrefs; i++) napi_delete_reference(env, b->refs[i]);
  free(b->refs);
  free(b->m.layers);
  free(b->m.inv_freq);
  free(b);
}

typedef struct {
  napi_env env;
  model_box *box;
  size_t cap;
  char where[96];
} builder;

static int keep(builder *b, napi_value v) {
  if (b->box->nrefs == b->cap) {
    b->cap = b->cap ? 2 * b->cap : 64;
    napi_ref *r = (napi_ref *)realloc(b->box->refs, b->cap * sizeof(napi_ref));
    if (!r) return 0;
    b->box->refs = r;
  }
  return napi_create_reference(b->env, v, 1, &b->box->refs[b->box->nrefs++]) == napi_ok;
}

static napi_value fail_len(napi_env env, const char *what, int64_t got, int64_t want) {
  char msg[240];
  snprintf(msg, sizeof msg, "modelCreate: %s holds %lld elements, the model's dims need %lld", what, (long long)got,
           (long long)want);
  return fail_range(env, msg);
}

/* A float32 array of n elements at slot (or NULL when null and optional). Throws and returns 0 on a bad one. */
static int f32_slot(builder *b, napi_value arr, uint32_t slot, int64_t n, int optional, const float **out,
                    const char *name) {
  napi_value v;
  *out = NULL;
  if (!element(b->env, arr, slot, &v)) return 0;
  if (is_null(b->env, v)) {
    if (optional) return 1;
    char msg[160];
    snprintf(msg, sizeof msg, "modelCreate: %s (slot %u) is missing", name, slot);
    fail_type(b->env, msg);
    return 0;
  }
  napi_typedarray_type t;
  void *d;
  int64_t len;
  if (!typed(b->env, v, &t, &d, &len) || t != napi_float32_array) {
    char msg[160];
    snprintf(msg, sizeof msg, "modelCreate: %s (slot %u) must be a Float32Array", name, slot);
    fail_type(b->env, msg);
    return 0;
  }
  if (len != n) {
    fail_len(b->env, name, len, n);
    return 0;
  }
  if (!keep(b, v)) return 0;
  *out = (const float *)d;
  return 1;
}

/* A weight matrix (rows, cols) at slot, in the dtype dtypes[slot] says. */
static int mat_slot(builder *b, napi_value arr, const int32_t *dtypes, uint32_t slot, int64_t rows, int64_t cols,
                    mat_t *out, const char *name) {
  napi_value v;
  if (!element(b->env, arr, slot, &v)) return 0;
  napi_typedarray_type t;
  void *d;
  int64_t len;
  const int dt = dtypes[slot];
  const napi_typedarray_type want = dt == DT_F32 ? napi_float32_array : napi_uint16_array;
  char msg[200];
  if (dt < DT_F32 || dt > DT_F16) {
    snprintf(msg, sizeof msg, "modelCreate: dtypes[%u] = %d is not 0 (f32), 1 (bf16) or 2 (f16)", slot, dt);
    fail_range(b->env, msg);
    return 0;
  }
  if (is_null(b->env, v) || !typed(b->env, v, &t, &d, &len) || t != want) {
    snprintf(msg, sizeof msg, "modelCreate: %s (slot %u) must be a %s", name, slot,
             dt == DT_F32 ? "Float32Array" : "Uint16Array");
    fail_type(b->env, msg);
    return 0;
  }
  if (len != rows * cols) {
    fail_len(b->env, name, len, rows * cols);
    return 0;
  }
  if (!keep(b, v)) return 0;
  out->data = d;
  out->dtype = dt;
  out->rows = rows;
  out->cols = cols;
  return 1;
}

/* The gradient accumulator at slot of grads (n floats), or NULL. */
static int grad_slot(builder *b, napi_value grads, uint32_t slot, int64_t n, float **out, const char *name) {
  const float *g;
  char label[120];
  snprintf(label, sizeof label, "the gradient of %s", name);
  if (!f32_slot(b, grads, slot, n, 1, &g, label)) return 0;
  *out = (float *)g;
  return 1;
}

/* LoRA of linear index li: [A, B, dA, dB] or null. */
static int lora_slot(builder *b, napi_value lora, const int32_t *ranks, const float *scales, uint32_t li,
                     linear_t *lin) {
  napi_value v;
  if (!element(b->env, lora, li, &v)) return 0;
  if (is_null(b->env, v)) return 1;
  const int64_t r = ranks[li], in = lin->w.rows, out = lin->w.cols;
  if (r < 1 || r > 65536) {
    char msg[120];
    snprintf(msg, sizeof msg, "modelCreate: loraRank[%u] = %lld must be in [1, 65536]", li, (long long)r);
    fail_range(b->env, msg);
    return 0;
  }
  if (!(fabsf(scales[li]) <= 1e4f)) { /* NaN fails too; peft-config.ts refuses such adapters by name */
    char msg[120];
    snprintf(msg, sizeof msg, "modelCreate: loraScale[%u] = %g must be finite, at most 1e4 in size", li, (double)scales[li]);
    fail_range(b->env, msg);
    return 0;
  }
  lin->rank = r;
  lin->scale = scales[li];
  const float *a, *bb, *da, *db;
  char name[64];
  snprintf(name, sizeof name, "lora[%u][0] (A)", li);
  if (!f32_slot(b, v, 0, in * r, 0, &a, name)) return 0;
  snprintf(name, sizeof name, "lora[%u][1] (B)", li);
  if (!f32_slot(b, v, 1, r * out, 0, &bb, name)) return 0;
  snprintf(name, sizeof name, "lora[%u][2] (dA)", li);
  if (!f32_slot(b, v, 2, in * r, 1, &da, name)) return 0;
  snprintf(name, sizeof name, "lora[%u][3] (dB)", li);
  if (!f32_slot(b, v, 3, r * out, 1, &db, name)) return 0;
  lin->la = a;
  lin->lb = bb;
  lin->dla = (float *)da;
  lin->dlb = (float *)db;
  return 1;
}

/* Layer l's per-head q/k norms (Qwen3): both or neither, and as layer 0 has them. */
static int qk_norm_slots(builder *b, napi_value tensors, napi_value grads, uint32_t base, int64_t l) {
  model_t *m = &b->box->m;
  layer_t *ly = &m->layers[l];
  char name[64], msg[160];
  snprintf(name, sizeof name, "layer %lld q_norm", (long long)l);
  if (!f32_slot(b, tensors, base + SL_QN, m->hd, 1, &ly->qn, name) ||
      !grad_slot(b, grads, base + SL_QN, m->hd, &ly->dqn, name))
    return 0;
  snprintf(name, sizeof name, "layer %lld k_norm", (long long)l);
  if (!f32_slot(b, tensors, base + SL_KN, m->hd, ly->qn == NULL, &ly->kn, name) ||
      !grad_slot(b, grads, base + SL_KN, m->hd, &ly->dkn, name))
    return 0;
  if ((ly->kn != NULL && ly->qn == NULL) || (l > 0 && (ly->qn == NULL) != (m->layers[0].qn == NULL))) {
    snprintf(msg, sizeof msg, "modelCreate: layer %lld's q_norm / k_norm disagree with layer 0's", (long long)l);
    fail_type(b->env, msg);
    return 0;
  }
  return 1;
}

/* Layer l's norms, linear weights, biases and LoRA adapters from their slots (model_create's layout). */
static int layer_slots(builder *b, napi_value tensors, const int32_t *dtypes, napi_value grads, napi_value lora,
                       const int32_t *ranks, const float *scales, int64_t l) {
  static const char *lin_names[LIN_COUNT] = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};
  model_t *m = &b->box->m;
  const int64_t H = m->H, F = m->F, qd = m->nh * m->hd, kvd = m->kv * m->hd;
  layer_t *ly = &m->layers[l];
  const uint32_t base = (uint32_t)(SLOTS_GLOBAL + SLOTS_LAYER * l);
  char name[64];
  snprintf(name, sizeof name, "layer %lld input_layernorm", (long long)l);
  int ok = f32_slot(b, tensors, base + SL_LN1, H, 0, &ly->ln1, name) && grad_slot(b, grads, base + SL_LN1, H, &ly->dln1, name);
  snprintf(name, sizeof name, "layer %lld post_attention_layernorm", (long long)l);
  ok = ok && f32_slot(b, tensors, base + SL_LN2, H, 0, &ly->ln2, name) &&
       grad_slot(b, grads, base + SL_LN2, H, &ly->dln2, name);
  ok = ok && qk_norm_slots(b, tensors, grads, base, l);
  const int64_t ins[LIN_COUNT] = {H, H, H, qd, H, H, F}, outs[LIN_COUNT] = {qd, kvd, kvd, H, F, F, H};
  for (int i = 0; ok && i < LIN_COUNT; i++) {
    linear_t *lin = &ly->lin[i];
    snprintf(name, sizeof name, "layer %lld %s weight", (long long)l, lin_names[i]);
    ok = mat_slot(b, tensors, dtypes, base + SL_W + i, ins[i], outs[i], &lin->w, name) &&
         grad_slot(b, grads, base + SL_W + i, ins[i] * outs[i], &lin->dw, name);
    snprintf(name, sizeof name, "layer %lld %s bias", (long long)l, lin_names[i]);
    ok = ok && f32_slot(b, tensors, base + SL_B + i, outs[i], 1, &lin->bias, name) &&
         grad_slot(b, grads, base + SL_B + i, outs[i], &lin->dbias, name);
    ok = ok && lora_slot(b, lora, ranks, scales, (uint32_t)(l * LIN_COUNT + i), lin);
  }
  return ok;
}

napi_value model_create(napi_env env, napi_callback_info info) {
  static const char *fn = "modelCreate";
  size_t argc = 8;
  napi_value argv[8];
  CHECK_NAPI(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc < 8)
    return fail_type(env, "modelCreate(dims, invFreq, tensors, dtypes, grads, lora, loraRank, loraScale) needs 8 arguments");
  napi_typedarray_type t;
  void *d;
  int64_t len;
  if (!typed(env, argv[0], &t, &d, &len) || t != napi_float64_array || len != 11)
    return fail_type(env, "modelCreate: dims must be a Float64Array of 11 numbers");
  const double *dims = (const double *)d;
  if (!(dims[10] >= 0 && dims[10] < 1)) return fail_range(env, "modelCreate: dims[10] (LoRA dropout) must be in [0, 1)");
  for (int i = 0; i < 10; i++)
    if (!(dims[i] >= 0 && dims[i] <= 1e9)) return fail_range(env, "modelCreate: dims holds a negative or huge value");
  const int64_t H = (int64_t)dims[0], L = (int64_t)dims[1], nh = (int64_t)dims[2], kvh = (int64_t)dims[3],
                hd = (int64_t)dims[4], F = (int64_t)dims[5], V = (int64_t)dims[6];
  if (H < 1 || L < 1 || nh < 1 || kvh < 1 || hd < 2 || hd % 2 || F < 1 || V < 1 || nh % kvh)
    return fail_range(env, "modelCreate: dims must be positive, hd even, and nh a multiple of kv");
  if (!typed(env, argv[1], &t, &d, &len) || t != napi_float64_array || len != hd / 2)
    return fail_type(env, "modelCreate: invFreq must be a Float64Array of hd/2 numbers");
  const double *inv = (const double *)d;
  void *dt;
  int64_t ndt;
  const int64_t slots = SLOTS_GLOBAL + SLOTS_LAYER * L, nlin = LIN_COUNT * L + 1;
  if (!typed(env, argv[3], &t, &dt, &ndt) || t != napi_int32_array || ndt != slots)
    return fail_type(env, "modelCreate: dtypes must be an Int32Array with one entry per slot (4 + 18 per layer)");
  const int32_t *dtypes = (const int32_t *)dt;
  void *rk, *sc;
  int64_t nrk, nsc;
  if (!typed(env, argv[6], &t, &rk, &nrk) || t != napi_int32_array || nrk != nlin)
    return fail_type(env, "modelCreate: loraRank must be an Int32Array of L*7 + 1 entries");
  if (!typed(env, argv[7], &t, &sc, &nsc) || t != napi_float32_array || nsc != nlin)
    return fail_type(env, "modelCreate: loraScale must be a Float32Array of L*7 + 1 entries");

  model_box *box = (model_box *)calloc(1, sizeof(model_box));
  if (!box) return fail_range(env, "modelCreate: out of memory");
  model_t *m = &box->m;
  m->H = H, m->L = L, m->nh = nh, m->kv = kvh, m->hd = hd, m->F = F, m->V = V;
  m->eps = (float)dims[7];
  m->tied = dims[8] != 0;
  m->value_head = dims[9] != 0;
  m->lora_dropout = (float)dims[10];
  m->inv_freq = (double *)malloc((size_t)(hd / 2) * sizeof(double));
  m->layers = (layer_t *)calloc((size_t)L, sizeof(layer_t));
  builder b = {env, box, 0, ""};
  napi_value tensors = argv[2], grads = argv[4], lora = argv[5];
  int ok = m->inv_freq && m->layers;
  if (!ok) napi_throw_range_error(env, NULL, "modelCreate: out of memory");
  if (ok) memcpy(m->inv_freq, inv, (size_t)(hd / 2) * sizeof(double));
  /* global slots */
  if (ok && !m->tied) ok = mat_slot(&b, tensors, dtypes, S_EMBED, V, H, &m->embed, "embed_tokens") &&
                           grad_slot(&b, grads, S_EMBED, V * H, &m->dembed, "embed_tokens");
  /* the head: the language-model head, or (tied) the embedding a value model still looks up */
  if (ok && (!m->value_head || m->tied))
    ok = mat_slot(&b, tensors, dtypes, S_HEAD, H, V, &m->head.w, "the head") &&
         grad_slot(&b, grads, S_HEAD, H * V, &m->head.dw, "the head");
  if (ok) ok = f32_slot(&b, tensors, S_NORM, H, 0, &m->norm, "norm") &&
               grad_slot(&b, grads, S_NORM, H, &m->dnorm, "norm");
  if (ok && m->value_head) ok = f32_slot(&b, tensors, S_SCORE, H, 0, &m->score, "score") &&
                                grad_slot(&b, grads, S_SCORE, H, &m->dscore, "score");
  for (int64_t l = 0; ok && l < L; l++)
    ok = layer_slots(&b, tensors, dtypes, grads, lora, (const int32_t *)rk, (const float *)sc, l);
  if (ok) ok = lora_slot(&b, lora, (const int32_t *)rk, (const float *)sc, (uint32_t)(L * LIN_COUNT), &m->head);
  napi_value out;
  if (!ok || napi_create_external(env, box, model_finalize, NULL, &out) != napi_ok) {
    bool pending = false;
    napi_is_exception_pending(env, &pending);
    model_finalize(env, box, NULL);
    if (!pending) napi_throw_error(env, NULL, "modelCreate: could not build the model");
    return NULL;
  }
  /* from here the finalizer owns the box */
  if (!tag_handle(env, out, fn, HANDLE_MODEL)) return NULL;
  return out;
}

