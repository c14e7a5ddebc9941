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
 *       then 18 per layer from 4 + 18·l: ln1, ln2, the weights (in, out) of q, k, v, o, gate, up,
 *       down, their biases (q, k, v only; the rest null), then the per-head q_norm and k_norm (hd)
 *       of Qwen3 (null for the other families).
 *     Every length is checked against the dims; the model keeps references to the arrays (their
 *     contents may change in place, as the optimizer does; their identity may not).
 *   modelPassBytes(model, tokens, sequences, train) -> bytes a pass would allocate
 *   modelPass(model, tokens, lens, train, past?, kv?, caps?, seed?, parents?) -> pass (its forward
 *     done; seed: a training pass's LoRA dropout masks)
 *     tokens: Int32Array (N); lens: Int32Array (sequences), Σ lens = N. For sampling, past
 *     (Int32Array) gives each sequence's cached length, kv an Array of Float32Array caches
 *     (L, 2, cap, kv·hd) and caps (Int32Array) their rows; new keys and values are written there.
 *     parents (Int32Array (sequences), without caches): sequence s continues sequence parents[s]
 *     (an earlier one, so parents[s] < s) or starts afresh (-1); a shared prefix, model.h.
 *   passLogprobs(pass, targets, temperature, logp, entropy): logp, entropy (N) written
 *   passLogits(pass, rows, out): out (rows, V) = logits of the pass rows named in rows (Int32Array)
 *   passValues(pass, out): out (N) written (value head)
 *   passBackward(pass, dlogp): gradients of Σ dlogp·logp added into the model's accumulators
 *     (after passLogprobs on a training pass)
 *   passBackwardValues(pass, dvalue): the same for Σ dvalue·value
 *   passFree(pass): frees its buffers now (else when collected); freeing again does nothing
 * Out of memory in any of them throws an Error saying how many bytes were asked for. Models and
 * passes are externals tagged with their kind (napi_args.h): a handle of the wrong kind, or any
 * other value, is a TypeError naming the argument; a freed pass is an Error.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../napi_args.h"
#include "model_js.h"

typedef struct {
  pass_t *p;
  napi_ref model; /* keeps the model alive while the pass exists */
  model_box *box;
  int32_t *targets; /* (N) after passLogprobs */
  float *stats;     /* (N, 2) */
  float temperature;
} pass_box;

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

/* Argument 1 of fn as a model (a handle from modelCreate), or NULL after a TypeError. */
static model_box *get_model(napi_env env, napi_value v, const char *fn) {
  return (model_box *)arg_handle(env, v, fn, 1, HANDLE_MODEL);
}

/* Argument 1 of fn as a live pass: a TypeError for anything but a pass handle, an Error for a freed pass. */
static pass_box *get_pass(napi_env env, napi_value v, const char *fn) {
  pass_box *b = (pass_box *)arg_handle(env, v, fn, 1, HANDLE_PASS);
  if (!b) return NULL;
  if (!b->p) {
    char msg[120];
    snprintf(msg, sizeof msg, "%s: the pass was already freed (passFree)", fn);
    napi_throw_error(env, NULL, msg);
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

/* lens (nseq) are each at least 1 and add up to N, and every token is in the vocabulary; else throws. */
static int check_tokens(napi_env env, const model_t *m, const int32_t *tokens, int64_t N, const int32_t *lens,
                        int64_t nseq) {
  char msg[240];
  int64_t total = 0;
  for (int64_t s = 0; s < nseq; s++) {
    if (lens[s] < 1) {
      snprintf(msg, sizeof msg, "modelPass: lens[%lld] = %d must be at least 1", (long long)s, lens[s]);
      fail_range(env, msg);
      return 0;
    }
    total += lens[s];
  }
  if (total != N) {
    snprintf(msg, sizeof msg, "modelPass: lens add up to %lld but tokens holds %lld", (long long)total, (long long)N);
    fail_range(env, msg);
    return 0;
  }
  for (int64_t i = 0; i < N; i++)
    if (tokens[i] < 0 || tokens[i] >= m->V) {
      snprintf(msg, sizeof msg, "modelPass: tokens[%lld] = %d is outside the vocabulary [0, %lld)", (long long)i, tokens[i],
               (long long)m->V);
      fail_range(env, msg);
      return 0;
    }
  return 1;
}

/*
 * The KV caches of a cached pass: past (Int32Array), kv (Array of Float32Array (L, 2, cap, kv·hd))
 * and caps (Int32Array), one entry per sequence, checked; past and cap go to p64 and c64. Returns
 * the caches (the caller frees the array), or NULL with an exception pending.
 */
static float **read_caches(napi_env env, const model_t *m, napi_value pastv, napi_value kvv, napi_value capsv,
                           const int32_t *lens, int64_t nseq, int64_t *p64, int64_t *c64) {
  static const char *fn = "modelPass";
  int32_t *past, *caps;
  int64_t npast, ncaps;
  if (!arg_i32_or_null(env, pastv, fn, "past", &past, &npast) || !arg_i32_or_null(env, capsv, fn, "caps", &caps, &ncaps))
    return NULL;
  if (!past || !caps || npast != nseq || ncaps != nseq) {
    fail_range(env, "modelPass: past and caps need one entry per sequence");
    return NULL;
  }
  float **kv = (float **)malloc((size_t)nseq * sizeof(float *));
  if (!kv) {
    oom(env, fn, (size_t)nseq * sizeof(float *));
    return NULL;
  }
  const int64_t kvd = m->kv * m->hd;
  for (int64_t s = 0; s < nseq; s++) {
    napi_value v;
    napi_typedarray_type t;
    void *d;
    int64_t len;
    p64[s] = past[s];
    c64[s] = caps[s];
    const int bad = !element(env, kvv, (uint32_t)s, &v) || !typed(env, v, &t, &d, &len) || t != napi_float32_array;
    if (bad || past[s] < 0 || past[s] + lens[s] > caps[s] || len != m->L * 2 * caps[s] * kvd) {
      char msg[200];
      snprintf(msg, sizeof msg,
               "modelPass: kv[%lld] must be a Float32Array of L*2*cap*kv*hd floats with past + len <= cap", (long long)s);
      free(kv);
      fail_range(env, msg);
      return NULL;
    }
    kv[s] = (float *)d;
  }
  return kv;
}

/* The parents argument of modelPass: NULL (and *ok set) when absent, else an Int32Array (nseq) with
 * -1 <= parents[s] < s; anything else throws (*ok cleared). */
static int32_t *read_parents(napi_env env, napi_value v, int64_t nseq, int cached, int *ok) {
  static const char *fn = "modelPass";
  int32_t *parents;
  int64_t n;
  char msg[200];
  *ok = 0;
  if (!arg_i32_or_null(env, v, fn, "parents", &parents, &n)) return NULL;
  if (parents && cached) {
    fail_range(env, "modelPass: parents (shared prefixes) cannot be combined with KV caches");
    return NULL;
  }
  if (parents && n != nseq) {
    snprintf(msg, sizeof msg, "modelPass: parents holds %lld entries for %lld sequences", (long long)n, (long long)nseq);
    fail_range(env, msg);
    return NULL;
  }
  for (int64_t s = 0; parents && s < nseq; s++)
    if (parents[s] < -1 || parents[s] >= s) {
      snprintf(msg, sizeof msg, "modelPass: parents[%lld] = %d must be -1 or an earlier sequence (0 .. %lld)",
               (long long)s, parents[s], (long long)s - 1);
      fail_range(env, msg);
      return NULL;
    }
  *ok = 1;
  return parents;
}

static napi_value model_pass(napi_env env, napi_callback_info info) {
  static const char *fn = "modelPass";
  size_t argc = 9;
  napi_value argv[9];
  CHECK_NAPI(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc < 4)
    return fail_type(env,
                     "modelPass(model, tokens, lens, train, past?, kv?, caps?, seed?, parents?) needs at least 4 arguments");
  double seed = 0;
  if (argc >= 8 && !is_null(env, argv[7]) && !arg_number(env, argv[7], fn, "seed", &seed)) return NULL;
  if (!(seed >= 0 && seed <= 9007199254740991.0)) return fail_range(env, "modelPass: seed must be in [0, 2^53)");
  model_box *mb = get_model(env, argv[0], fn);
  if (!mb) return NULL;
  const model_t *m = &mb->m;
  int32_t *tokens, *lens;
  int64_t N, nseq;
  int train;
  if (!arg_i32_or_null(env, argv[1], fn, "tokens", &tokens, &N) || !arg_i32_or_null(env, argv[2], fn, "lens", &lens, &nseq) ||
      !arg_flag(env, argv[3], fn, "train", &train))
    return NULL;
  if (!tokens || !lens || nseq < 1) return fail_type(env, "modelPass: tokens and lens must be non-empty Int32Arrays");
  if (!check_tokens(env, m, tokens, N, lens, nseq)) return NULL;
  const int cached = argc >= 7 && !is_null(env, argv[5]);
  int parents_ok = 1;
  const int32_t *parents = argc >= 9 ? read_parents(env, argv[8], nseq, cached, &parents_ok) : NULL;
  if (!parents_ok) return NULL;
  float **kv = NULL;
  int64_t *n64 = (int64_t *)malloc((size_t)nseq * 3 * sizeof(int64_t)); /* n, past, cap per sequence */
  if (!n64) return oom(env, fn, (size_t)nseq * 24);
  int64_t *p64 = n64 + nseq, *c64 = n64 + 2 * nseq;
  for (int64_t s = 0; s < nseq; s++) n64[s] = lens[s], p64[s] = 0, c64[s] = 0;
  if (cached) {
    if (train)
      fail_range(env, "modelPass: a training pass takes no caches");
    else
      kv = read_caches(env, m, argv[4], argv[5], argv[6], lens, nseq, p64, c64);
    if (!kv) {
      free(n64);
      return NULL;
    }
  }
  if (parents) chain_pasts(nseq, n64, parents, p64);
  pass_box *box = (pass_box *)calloc(1, sizeof(pass_box));
  const size_t bytes = pass_bytes(m, N, nseq, train);
  pass_t *p = box ? pass_create(m, nseq, n64, p64, kv, c64, tokens, train) : NULL;
  free(kv);
  free(n64);
  if (!p) {
    free(box);
    return oom(env, fn, bytes);
  }
  if (parents) pass_set_parents(p, parents);
  box->p = p;
  box->box = mb;
  p->dropout_seed = (uint64_t)seed;
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
  /* from here the finalizer owns the box */
  if (!tag_handle(env, out, fn, HANDLE_PASS)) return NULL;
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
  if (argc < 1) return fail_type(env, "passFree(pass) needs 1 argument");
  pass_box *b = (pass_box *)arg_handle(env, argv[0], "passFree", 1, HANDLE_PASS);
  if (b) pass_release(env, b); /* a second free finds nothing left to release */
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
