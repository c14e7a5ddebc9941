/*
 * N-API bindings of the native engine's decoder (src/engine/native/ calls them):
 *
 *   modelCreate(dims, invFreq, tensors, dtypes, grads, lora, loraRank, loraScale) -> model
 *     dims: Float64Array [H, L, nh, kv, hd, F, V, eps, tied, valueHead]
 *     invFreq: Float64Array (hd/2) rotary frequencies
 *     tensors, grads: Arrays indexed by slot (below) of typed arrays or null. A weight is a
 *       Float32Array (dtype 0) or a Uint16Array of bfloat16 (1) / float16 (2) bits; norms, biases
 *       and the value head are Float32Arrays; gradients are Float32Arrays or null (frozen).
 *     dtypes: Int32Array (slots) of the weights' dtypes.
 *     lora: Array (L·7 + 1: each layer's q, k, v, o, gate, up, down, then the head) of null or
 *       [A (in·r), B (r·out), dA | null, dB | null] Float32Arrays (A and B transposed, model.h);
 *       loraRank: Int32Array, loraScale: Float32Array of the same length.
 *     Slots: 0 embedding (V, H) (untied only), 1 head (H, V), 2 final norm (H), 3 value head (H),
 *       then 16 per layer from 4 + 16·l: ln1, ln2, the weights (in, out) of q, k, v, o, gate, up,
 *       down, then their biases (q, k, v only; the rest null).
 *     Every length is checked against the dims; the model keeps references to the arrays (their
 *     contents may change in place, as the optimizer does; their identity may not).
 *   modelPassBytes(model, tokens, sequences, train) -> bytes a pass would allocate
 *   modelPass(model, tokens, lens, train, past?, kv?, caps?) -> pass (its forward done)
 *     tokens: Int32Array (N); lens: Int32Array (sequences), Σ lens = N. For sampling, past
 *     (Int32Array) gives each sequence's cached length, kv an Array of Float32Array caches
 *     (L, 2, cap, kv·hd) and caps (Int32Array) their rows; new keys and values are written there.
 *   passLogprobs(pass, targets, temperature, logp, entropy): logp, entropy (N) written
 *   passLogits(pass, rows, out): out (rows, V) = logits of the pass rows named in rows (Int32Array)
 *   passValues(pass, out): out (N) written (value head)
 *   passBackward(pass, dlogp): gradients of Σ dlogp·logp added into the model's accumulators
 *     (after passLogprobs on a training pass)
 *   passBackwardValues(pass, dvalue): the same for Σ dvalue·value
 *   passFree(pass): frees its buffers now (else when collected)
 * Out of memory in any of them throws an Error saying how many bytes were asked for.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../napi_args.h"
#include "model.h"

#define SLOTS_GLOBAL 4
#define SLOTS_LAYER 16
enum { S_EMBED, S_HEAD, S_NORM, S_SCORE };
enum { SL_LN1, SL_LN2, SL_W, SL_B = SL_W + LIN_COUNT };

typedef struct {
  model_t m;
  napi_ref *refs; /* the arrays the model points into */
  size_t nrefs;
} model_box;

typedef struct {
  pass_t *p;
  napi_ref model; /* keeps the model alive while the pass exists */
  model_box *box;
  int32_t *targets; /* (N) after passLogprobs */
  float *stats;     /* (N, 2) */
  float temperature;
} pass_box;

static void model_finalize(napi_env env, void *data, void *hint) {
  (void)hint;
  model_box *b = (model_box *)data;
  for (size_t i = 0; i < b->nrefs; i++) napi_delete_reference(env, b->refs[i]);
  free(b->refs);
  free(b->m.layers);
  free(b->m.inv_freq);
  free(b);
}

static void pass_release(napi_env env, pass_box *b) {
  pass_free(b->p);
  b->p = NULL;
  free(b->targets);
  b->targets = NULL;
  free(b->stats);
  b->stats = NULL;
  if (b->model) {
    napi_delete_reference(env, b->model);
    b->model = NULL;
  }
}

static void pass_finalize(napi_env env, void *data, void *hint) {
  (void)hint;
  pass_release(env, (pass_box *)data);
  free(data);
}

/* A typed array argument with its element type. */
static int typed(napi_env env, napi_value v, napi_typedarray_type *type, void **data, int64_t *len) {
  bool is = false;
  if (napi_is_typedarray(env, v, &is) != napi_ok || !is) return 0;
  size_t n = 0;
  napi_value ab;
  size_t off;
  if (napi_get_typedarray_info(env, v, type, &n, data, &ab, &off) != napi_ok) return 0;
  *len = (int64_t)n;
  return 1;
}

static int is_null(napi_env env, napi_value v) {
  napi_valuetype t;
  return napi_typeof(env, v, &t) == napi_ok && (t == napi_null || t == napi_undefined);
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

/* Element i of an Array. */
static int element(napi_env env, napi_value arr, uint32_t i, napi_value *out) {
  return napi_get_element(env, arr, i, out) == napi_ok;
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

static napi_value model_create(napi_env env, napi_callback_info info) {
  static const char *fn = "modelCreate";
  size_t argc = 8;
  napi_value argv[8];
  CHECK_NAPI(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc < 8)
    return fail_type(env, "modelCreate(dims, invFreq, tensors, dtypes, grads, lora, loraRank, loraScale) needs 8 arguments");
  napi_typedarray_type t;
  void *d;
  int64_t len;
  if (!typed(env, argv[0], &t, &d, &len) || t != napi_float64_array || len != 10)
    return fail_type(env, "modelCreate: dims must be a Float64Array of 10 numbers");
  const double *dims = (const double *)d;
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
    return fail_type(env, "modelCreate: dtypes must be an Int32Array with one entry per slot (4 + 16 per layer)");
  const int32_t *dtypes = (const int32_t *)dt;
  void *rk, *sc;
  int64_t nrk, nsc;
  if (!typed(env, argv[6], &t, &rk, &nrk) || t != napi_int32_array || nrk != nlin)
    return fail_type(env, "modelCreate: loraRank must be an Int32Array of L*7 + 1 entries");
  if (!typed(env, argv[7], &t, &sc, &nsc) || t != napi_float32_array || nsc != nlin)
    return fail_type(env, "modelCreate: loraScale must be a Float32Array of L*7 + 1 entries");
  (void)fn;

  model_box *box = (model_box *)calloc(1, sizeof(model_box));
  if (!box) return fail_range(env, "modelCreate: out of memory");
  model_t *m = &box->m;
  m->H = H, m->L = L, m->nh = nh, m->kv = kvh, m->hd = hd, m->F = F, m->V = V;
  m->eps = (float)dims[7];
  m->tied = dims[8] != 0;
  m->value_head = dims[9] != 0;
  m->inv_freq = (double *)malloc((size_t)(hd / 2) * sizeof(double));
  m->layers = (layer_t *)calloc((size_t)L, sizeof(layer_t));
  builder b = {env, box, 0, ""};
  napi_value tensors = argv[2], grads = argv[4], lora = argv[5];
  int ok = m->inv_freq && m->layers;
  if (!ok) napi_throw_range_error(env, NULL, "modelCreate: out of memory");
  if (ok) memcpy(m->inv_freq, inv, (size_t)(hd / 2) * sizeof(double));
  const int64_t qd = nh * hd, kvd = kvh * hd;
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
  static const char *lin_names[LIN_COUNT] = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};
  for (int64_t l = 0; ok && l < L; l++) {
    layer_t *ly = &m->layers[l];
    const uint32_t base = (uint32_t)(SLOTS_GLOBAL + SLOTS_LAYER * l);
    char name[64];
    snprintf(name, sizeof name, "layer %lld input_layernorm", (long long)l);
    ok = f32_slot(&b, tensors, base + SL_LN1, H, 0, &ly->ln1, name) && grad_slot(&b, grads, base + SL_LN1, H, &ly->dln1, name);
    snprintf(name, sizeof name, "layer %lld post_attention_layernorm", (long long)l);
    ok = ok && f32_slot(&b, tensors, base + SL_LN2, H, 0, &ly->ln2, name) &&
         grad_slot(&b, grads, base + SL_LN2, H, &ly->dln2, name);
    const int64_t ins[LIN_COUNT] = {H, H, H, qd, H, H, F}, outs[LIN_COUNT] = {qd, kvd, kvd, H, F, F, H};
    for (int i = 0; ok && i < LIN_COUNT; i++) {
      linear_t *lin = &ly->lin[i];
      snprintf(name, sizeof name, "layer %lld %s weight", (long long)l, lin_names[i]);
      ok = mat_slot(&b, tensors, dtypes, base + SL_W + i, ins[i], outs[i], &lin->w, name) &&
           grad_slot(&b, grads, base + SL_W + i, ins[i] * outs[i], &lin->dw, name);
      snprintf(name, sizeof name, "layer %lld %s bias", (long long)l, lin_names[i]);
      ok = ok && f32_slot(&b, tensors, base + SL_B + i, outs[i], 1, &lin->bias, name) &&
           grad_slot(&b, grads, base + SL_B + i, outs[i], &lin->dbias, name);
      ok = ok && lora_slot(&b, lora, (const int32_t *)rk, (const float *)sc, (uint32_t)(l * LIN_COUNT + i), lin);
    }
  }
  if (ok) ok = lora_slot(&b, lora, (const int32_t *)rk, (const float *)sc, (uint32_t)(L * LIN_COUNT), &m->head);
  napi_value out;
  if (!ok || napi_create_external(env, box, model_finalize, NULL, &out) != napi_ok) {
    bool pending = false;
    napi_is_exception_pending(env, &pending);
    model_finalize(env, box, NULL);
    if (!pending) napi_throw_error(env, NULL, "modelCreate: could not build the model");
    return NULL;
  }
  return out;
}

static model_box *get_model(napi_env env, napi_value v, const char *fn) {
  void *d = NULL;
  if (napi_get_value_external(env, v, &d) != napi_ok || !d) {
    char msg[120];
    snprintf(msg, sizeof msg, "%s: the first argument must be a model from modelCreate", fn);
    fail_type(env, msg);
    return NULL;
  }
  return (model_box *)d;
}

static pass_box *get_pass(napi_env env, napi_value v, const char *fn) {
  void *d = NULL;
  char msg[120];
  if (napi_get_value_external(env, v, &d) != napi_ok || !d) {
    snprintf(msg, sizeof msg, "%s: the first argument must be a pass from modelPass", fn);
    fail_type(env, msg);
    return NULL;
  }
  pass_box *b = (pass_box *)d;
  if (!b->p) {
    snprintf(msg, sizeof msg, "%s: the pass was freed", fn);
    fail_type(env, msg);
    return NULL;
  }
  return b;
}

static napi_value oom(napi_env env, const char *fn, size_t bytes) {
  char msg[200];
  snprintf(msg, sizeof msg, "%s: out of memory (asked for %.1f MiB)", fn, (double)bytes / 1048576.0);
  napi_throw_error(env, "ERR_AGENT_R1_OOM", msg);
  return NULL;
}

static napi_value model_pass_bytes(napi_env env, napi_callback_info info) {
  static const char *fn = "modelPassBytes";
  size_t argc = 4;
  napi_value argv[4], out;
  CHECK_NAPI(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc < 4) return fail_type(env, "modelPassBytes(model, tokens, sequences, train) needs 4 arguments");
  model_box *mb = get_model(env, argv[0], fn);
  int64_t n, s;
  int train;
  if (!mb || !arg_dim(env, argv[1], fn, "tokens", &n) || !arg_dim(env, argv[2], fn, "sequences", &s) ||
      !arg_flag(env, argv[3], fn, "train", &train))
    return NULL;
  CHECK_NAPI(env, napi_create_double(env, (double)pass_bytes(&mb->m, n, s, train), &out));
  return out;
}

static napi_value model_pass(napi_env env, napi_callback_info info) {
  static const char *fn = "modelPass";
  size_t argc = 7;
  napi_value argv[7];
  CHECK_NAPI(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc < 4) return fail_type(env, "modelPass(model, tokens, lens, train, past?, kv?, caps?) needs at least 4 arguments");
  model_box *mb = get_model(env, argv[0], fn);
  if (!mb) return NULL;
  const model_t *m = &mb->m;
  int32_t *tokens, *lens, *past = NULL, *caps = NULL;
  int64_t N, nseq, npast = 0, ncaps = 0;
  int train;
  if (!arg_i32_or_null(env, argv[1], fn, "tokens", &tokens, &N) || !arg_i32_or_null(env, argv[2], fn, "lens", &lens, &nseq) ||
      !arg_flag(env, argv[3], fn, "train", &train))
    return NULL;
  if (!tokens || !lens || nseq < 1) return fail_type(env, "modelPass: tokens and lens must be non-empty Int32Arrays");
  char msg[240];
  int64_t total = 0;
  for (int64_t s = 0; s < nseq; s++) {
    if (lens[s] < 1) {
      snprintf(msg, sizeof msg, "modelPass: lens[%lld] = %d must be at least 1", (long long)s, lens[s]);
      return fail_range(env, msg);
    }
    total += lens[s];
  }
  if (total != N) {
    snprintf(msg, sizeof msg, "modelPass: lens add up to %lld but tokens holds %lld", (long long)total, (long long)N);
    return fail_range(env, msg);
  }
  for (int64_t i = 0; i < N; i++)
    if (tokens[i] < 0 || tokens[i] >= m->V) {
      snprintf(msg, sizeof msg, "modelPass: tokens[%lld] = %d is outside the vocabulary [0, %lld)", (long long)i, tokens[i],
               (long long)m->V);
      return fail_range(env, msg);
    }
  const int cached = argc >= 7 && !is_null(env, argv[5]);
  float **kv = NULL;
  int64_t *n64 = (int64_t *)malloc((size_t)nseq * 3 * sizeof(int64_t)); /* n, past, cap per sequence */
  if (!n64) return oom(env, fn, (size_t)nseq * 24);
  int64_t *p64 = n64 + nseq, *c64 = n64 + 2 * nseq;
  for (int64_t s = 0; s < nseq; s++) n64[s] = lens[s], p64[s] = 0, c64[s] = 0;
  if (cached) {
    if (train) {
      free(n64);
      return fail_range(env, "modelPass: a training pass takes no caches");
    }
    if (!arg_i32_or_null(env, argv[4], fn, "past", &past, &npast) || !arg_i32_or_null(env, argv[6], fn, "caps", &caps, &ncaps)) {
      free(n64);
      return NULL;
    }
    if (!past || !caps || npast != nseq || ncaps != nseq) {
      free(n64);
      return fail_range(env, "modelPass: past and caps need one entry per sequence");
    }
    kv = (float **)malloc((size_t)nseq * sizeof(float *));
    if (!kv) {
      free(n64);
      return oom(env, fn, (size_t)nseq * sizeof(float *));
    }
    const int64_t kvd = m->kv * m->hd;
    for (int64_t s = 0; s < nseq; s++) {
      napi_value v;
      napi_typedarray_type t;
      void *d;
      int64_t len;
      p64[s] = past[s];
      c64[s] = caps[s];
      const int bad = !element(env, argv[5], (uint32_t)s, &v) || !typed(env, v, &t, &d, &len) || t != napi_float32_array;
      if (bad || past[s] < 0 || past[s] + lens[s] > caps[s] || len != m->L * 2 * caps[s] * kvd) {
        snprintf(msg, sizeof msg,
                 "modelPass: kv[%lld] must be a Float32Array of L*2*cap*kv*hd floats with past + len <= cap", (long long)s);
        free(kv);
        free(n64);
        return fail_range(env, msg);
      }
      kv[s] = (float *)d;
    }
  }
  pass_box *box = (pass_box *)calloc(1, sizeof(pass_box));
  const size_t bytes = pass_bytes(m, N, nseq, train);
  pass_t *p = box ? pass_create(m, nseq, n64, p64, kv, c64, tokens, train) : NULL;
  free(kv);
  free(n64);
  if (!p) {
    free(box);
    return oom(env, fn, bytes);
  }
  box->p = p;
  box->box = mb;
  if (!decoder_forward(m, p)) {
    pass_free(p);
    free(box);
    return oom(env, fn, bytes);
  }
  napi_value out;
  if (napi_create_reference(env, argv[0], 1, &box->model) != napi_ok ||
      napi_create_external(env, box, pass_finalize, NULL, &out) != napi_ok) {
    pass_release(env, box);
    free(box);
    napi_throw_error(env, NULL, "modelPass: N-API call failed");
    return NULL;
  }
  return out;
}

static napi_value pass_logprobs(napi_env env, napi_callback_info info) {
  static const char *fn = "passLogprobs";
  size_t argc = 5;
  napi_value argv[5];
  CHECK_NAPI(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc < 5) return fail_type(env, "passLogprobs(pass, targets, temperature, logp, entropy) needs 5 arguments");
  pass_box *b = get_pass(env, argv[0], fn);
  if (!b) return NULL;
  const model_t *m = &b->box->m;
  int32_t *targets;
  int64_t nt, nl, ne;
  double temp;
  float *logp, *ent;
  if (!arg_i32_or_null(env, argv[1], fn, "targets", &targets, &nt) || !arg_number(env, argv[2], fn, "temperature", &temp) ||
      !arg_f32(env, argv[3], fn, "logp", &logp, &nl) || !arg_f32(env, argv[4], fn, "entropy", &ent, &ne))
    return NULL;
  const int64_t N = b->p->N;
  if (!targets || !expect_len(env, fn, "targets", nt, N, "tokens") || !expect_len(env, fn, "logp", nl, N, "tokens") ||
      !expect_len(env, fn, "entropy", ne, N, "tokens"))
    return NULL;
  if (!(temp > 0)) return fail_range(env, "passLogprobs: temperature must be positive");
  if (m->value_head) return fail_type(env, "passLogprobs: this model has a value head");
  char msg[200];
  for (int64_t i = 0; i < N; i++)
    if (targets[i] < 0 || targets[i] >= m->V) {
      snprintf(msg, sizeof msg, "passLogprobs: targets[%lld] = %d is outside the vocabulary", (long long)i, targets[i]);
      return fail_range(env, msg);
    }
  free(b->targets);
  free(b->stats);
  b->targets = (int32_t *)malloc((size_t)N * sizeof(int32_t));
  b->stats = (float *)malloc((size_t)N * 2 * sizeof(float));
  if (!b->targets || !b->stats) return oom(env, fn, (size_t)N * 12);
  memcpy(b->targets, targets, (size_t)N * sizeof(int32_t));
  b->temperature = (float)temp;
  if (!head_logprobs(m, b->p, b->targets, b->temperature, logp, ent, b->stats)) return oom(env, fn, 0);
  return NULL;
}

static napi_value pass_logits(napi_env env, napi_callback_info info) {
  static const char *fn = "passLogits";
  size_t argc = 3;
  napi_value argv[3];
  CHECK_NAPI(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc < 3) return fail_type(env, "passLogits(pass, rows, out) needs 3 arguments");
  pass_box *b = get_pass(env, argv[0], fn);
  if (!b) return NULL;
  const model_t *m = &b->box->m;
  int32_t *rows;
  int64_t nr, no;
  float *out;
  if (!arg_i32_or_null(env, argv[1], fn, "rows", &rows, &nr) || !arg_f32(env, argv[2], fn, "out", &out, &no)) return NULL;
  if (!rows || !expect_len(env, fn, "out", no, nr * m->V, "rows*V")) return NULL;
  if (m->value_head) return fail_type(env, "passLogits: this model has a value head");
  int64_t *r64 = (int64_t *)malloc((size_t)(nr > 0 ? nr : 1) * sizeof(int64_t));
  if (!r64) return oom(env, fn, (size_t)nr * 8);
  for (int64_t i = 0; i < nr; i++) {
    if (rows[i] < 0 || rows[i] >= b->p->N) {
      free(r64);
      return fail_range(env, "passLogits: a row is outside the pass");
    }
    r64[i] = rows[i];
  }
  const int ok = head_logits(m, b->p, r64, nr, out);
  free(r64);
  return ok ? NULL : oom(env, fn, 0);
}

static napi_value pass_values(napi_env env, napi_callback_info info) {
  static const char *fn = "passValues";
  size_t argc = 2;
  napi_value argv[2];
  CHECK_NAPI(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc < 2) return fail_type(env, "passValues(pass, out) needs 2 arguments");
  pass_box *b = get_pass(env, argv[0], fn);
  if (!b) return NULL;
  float *out;
  int64_t no;
  if (!arg_f32(env, argv[1], fn, "out", &out, &no) || !expect_len(env, fn, "out", no, b->p->N, "tokens")) return NULL;
  if (!b->box->m.value_head) return fail_type(env, "passValues: this model has no value head");
  head_values(&b->box->m, b->p, out);
  return NULL;
}

static napi_value pass_backward(napi_env env, napi_callback_info info) {
  static const char *fn = "passBackward";
  size_t argc = 2;
  napi_value argv[2];
  CHECK_NAPI(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc < 2) return fail_type(env, "passBackward(pass, dlogp) needs 2 arguments");
  pass_box *b = get_pass(env, argv[0], fn);
  if (!b) return NULL;
  float *d;
  int64_t n;
  if (!arg_f32(env, argv[1], fn, "dlogp", &d, &n) || !expect_len(env, fn, "dlogp", n, b->p->N, "tokens")) return NULL;
  if (!b->p->train) return fail_type(env, "passBackward: the pass was not made for training");
  if (!b->stats) return fail_type(env, "passBackward: call passLogprobs on the pass first");
  if (!decoder_backward_logprobs(&b->box->m, b->p, b->targets, b->temperature, b->stats, d)) return oom(env, fn, 0);
  return NULL;
}

static napi_value pass_backward_values(napi_env env, napi_callback_info info) {
  static const char *fn = "passBackwardValues";
  size_t argc = 2;
  napi_value argv[2];
  CHECK_NAPI(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc < 2) return fail_type(env, "passBackwardValues(pass, dvalue) needs 2 arguments");
  pass_box *b = get_pass(env, argv[0], fn);
  if (!b) return NULL;
  float *d;
  int64_t n;
  if (!arg_f32(env, argv[1], fn, "dvalue", &d, &n) || !expect_len(env, fn, "dvalue", n, b->p->N, "tokens")) return NULL;
  if (!b->p->train) return fail_type(env, "passBackwardValues: the pass was not made for training");
  if (!b->box->m.value_head) return fail_type(env, "passBackwardValues: this model has no value head");
  if (!decoder_backward_values(&b->box->m, b->p, d)) return oom(env, fn, 0);
  return NULL;
}

static napi_value pass_free_js(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  CHECK_NAPI(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  void *d = NULL;
  if (argc < 1 || napi_get_value_external(env, argv[0], &d) != napi_ok || !d)
    return fail_type(env, "passFree: the argument must be a pass from modelPass");
  pass_release(env, (pass_box *)d);
  return NULL;
}

int register_model_ops(napi_env env, napi_value exports) {
  napi_property_descriptor props[] = {
      {"modelCreate", NULL, model_create, NULL, NULL, NULL, napi_enumerable, NULL},
      {"modelPassBytes", NULL, model_pass_bytes, NULL, NULL, NULL, napi_enumerable, NULL},
      {"modelPass", NULL, model_pass, NULL, NULL, NULL, napi_enumerable, NULL},
      {"passLogprobs", NULL, pass_logprobs, NULL, NULL, NULL, napi_enumerable, NULL},
      {"passLogits", NULL, pass_logits, NULL, NULL, NULL, napi_enumerable, NULL},
      {"passValues", NULL, pass_values, NULL, NULL, NULL, napi_enumerable, NULL},
      {"passBackward", NULL, pass_backward, NULL, NULL, NULL, napi_enumerable, NULL},
      {"passBackwardValues", NULL, pass_backward_values, NULL, NULL, NULL, napi_enumerable, NULL},
      {"passFree", NULL, pass_free_js, NULL, NULL, NULL, napi_enumerable, NULL},
  };
  return napi_define_properties(env, exports, sizeof props / sizeof props[0], props) == napi_ok;
}
