/*
 * The native engine's decoder (Qwen2 / Qwen3 / Llama layout) over native buffers: its weights, their
 * gradients and LoRA adapters, the activations one training pass keeps for its backward, and the
 * per-sequence key/value caches of sampling. Forward and backward are written out layer by layer,
 * as in llm.c (layers.c: paired *_forward / *_backward; decoder.c: the whole model).
 *
 * Notation: N rows (tokens) of a pass, H hidden, nh query heads, kv key/value heads, G = nh / kv,
 * hd head dim, F ffn size, V vocab, r LoRA rank, S keys a query sees.
 *
 * Every matrix a token row multiplies is held (in, out), so y (N, out) = x (N, in) @ w: the
 * matrix products then read w without a transpose, which the decode step (few rows) needs to be
 * fast (gemm.c reads B in place). Linear weights are stored (out, in) by Hugging Face; the loader
 * transposes them. The language-model head is (H, V); with tied embeddings it is the embedding
 * itself, transposed, and token lookups read its column.
 *
 * Weights may be float32, bfloat16 or float16 (blas.h's DT_*); matrix products convert tile by
 * tile, everything else computes in float32. Norm weights, biases, LoRA adapters, gradients and
 * activations are float32. The buffers belong to the caller (JavaScript typed arrays, outside the
 * wasm heap); the model holds pointers to them.
 */
#ifndef AGENT_R1_MODEL_H
#define AGENT_R1_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "../blas.h"

/* A matrix in its stored dtype: (rows, cols), row-major. */
typedef struct {
  const void *data;
  int dtype; /* DT_F32, DT_BF16, DT_F16 */
  int64_t rows, cols;
} mat_t;

/*
 * y (N, out) = x (N, in) @ w (in, out) [+ bias (out)] [+ scale · (x @ la (in, r)) @ lb (r, out)].
 * la and lb are LoRA's A and B transposed (PEFT stores A (r, in) and B (out, r)).
 */
typedef struct {
  mat_t w;           /* (in, out) */
  const float *bias; /* (out) or NULL */
  float *dw;         /* (in, out): gradient accumulator, or NULL when w is frozen */
  float *dbias;      /* (out) or NULL */
  const float *la;   /* (in, r) or NULL: no adapter */
  const float *lb;   /* (r, out) */
  float *dla, *dlb;  /* (in, r), (r, out): gradient accumulators when the adapter trains */
  int64_t rank;
  float scale;       /* alpha / r */
} linear_t;

enum { LIN_Q, LIN_K, LIN_V, LIN_O, LIN_GATE, LIN_UP, LIN_DOWN, LIN_COUNT };

typedef struct {
  const float *ln1, *ln2; /* (H) input and post-attention RMSNorm weights */
  float *dln1, *dln2;     /* (H) or NULL */
  const float *qn, *kn;   /* (hd) per-head RMSNorm of queries and keys before RoPE (Qwen3), or NULL */
  float *dqn, *dkn;       /* (hd) or NULL */
  linear_t lin[LIN_COUNT];
} layer_t;

typedef struct {
  int64_t H, L, nh, kv, hd, F, V;
  float eps;
  int tied;          /* the head is the embedding (transposed) */
  int value_head;    /* the output is a scalar per token (score), not logits */
  float lora_dropout; /* LoRA dropout p of training passes (layers.h lora_drop); 0: none */
  double *inv_freq;  /* (hd / 2) rotary frequencies, owned */
  mat_t embed;       /* (V, H) when not tied */
  float *dembed;     /* (V, H) or NULL */
  linear_t head;     /* (H, V): the language-model head (no bias) */
  const float *norm; /* (H) final RMSNorm */
  float *dnorm;
  const float *score; /* (H) value head */
  float *dscore;
  layer_t *layers; /* (L), owned */
} model_t;

/* Activations of one layer that a training pass keeps for its backward. */
typedef struct {
  float *x;          /* (N, H) the layer's input (residual stream) */
  float *rstd1;      /* (N) 1 / rms of x */
  float *h1;         /* (N, H) RMSNorm(x) */
  float *q;          /* (N, nh*hd) queries after RoPE */
  float *k;          /* (N, kv*hd) keys after RoPE */
  float *qr, *kr;    /* with q/k norms: q_proj's and k_proj's outputs before the norm; else NULL */
  float *rq, *rk;    /* (N, nh), (N, kv): 1 / rms of each head's row of qr, kr */
  float *v;          /* (N, kv*hd) values */
  float *lse;        /* (N, nh) log-sum-exp of each query's scaled scores */
  float *ctx;        /* (N, nh*hd) attention output, o_proj's input */
  float *x2;         /* (N, H) x + attention */
  float *rstd2;      /* (N) */
  float *h2;         /* (N, H) RMSNorm(x2) */
  float *gate, *up;  /* (N, F) */
  float *act;        /* (N, F) silu(gate)·up, down_proj's input */
  float *xa[LIN_COUNT]; /* (N, r) x @ la of each adapted linear, or NULL */
} layer_acts;

/*
 * One sequence of a pass: n new tokens at positions past .. past+n-1, whose keys and values are
 * written at rows past .. past+n-1 of k and v (per layer: (cap, kv*hd) each, row-major) and which
 * attend to rows 0 .. their own position. A training pass has past = 0 and k, v inside its
 * activations; a sampling pass uses each sequence's cache. A sequence of a pass without caches may
 * instead continue a parent sequence of the same pass (pass_set_parents): its past is the length
 * of its chain of ancestors, whose rows of the pass's k and v are its first keys and values.
 */
typedef struct {
  int64_t row0; /* first of its rows in the pass's (N, ...) buffers */
  int64_t n, past;
  float *kv;   /* sampling: (L, 2, cap, kv*hd) cache; training: NULL */
  int64_t cap; /* rows of the cache */
  int64_t parent; /* an earlier sequence of the pass this one continues (shared prefix), or -1 */
} seq_t;

typedef struct {
  int64_t N, nseq;
  seq_t *seqs;            /* (nseq) */
  int32_t *tokens;        /* (N) */
  int32_t *pos;           /* (N) positions */
  float *cos, *sin;       /* (N, hd/2) rotary tables for the positions */
  int train;              /* keeps every layer's activations */
  uint64_t dropout_seed;  /* a training pass's LoRA dropout masks derive from it */
  layer_acts *acts;       /* (L) training; (1) shared by all layers otherwise */
  float *xf;              /* (N, H) the last layer's output */
  float *rstdf;           /* (N) */
  float *hf;              /* (N, H) RMSNorm(xf): the head's input */
  void *arena;            /* every buffer above, one allocation */
  size_t bytes;
} pass_t;

/* Whether the layers normalize each head of the queries and keys (Qwen3). */
static inline int model_qk_norm(const model_t *m) { return m->L > 0 && m->layers[0].qn != NULL; }

/* Sizes and checks ------------------------------------------------------------------------ */

/* Bytes pass_create would allocate. */
size_t pass_bytes(const model_t *m, int64_t N, int64_t nseq, int train);
/* A pass over nseq sequences (lengths n[i], cache state past[i], kv / cap per sequence or NULL),
 * tokens (N = Σ n); NULL when out of memory. */
pass_t *pass_create(const model_t *m, int64_t nseq, const int64_t *n, const int64_t *past, float *const *kv,
                    const int64_t *cap, const int32_t *tokens, int train);
void pass_free(pass_t *p);
/* Chains of a pass without caches: past[s] (nseq) = the total length of sequence s's ancestors
 * under parent (nseq; parent[s] in [-1, s)). For pass_create, then pass_set_parents. */
void chain_pasts(int64_t nseq, const int64_t *n, const int32_t *parent, int64_t *past);
void pass_set_parents(pass_t *p, const int32_t *parent);

/* The decoder ---------------------------------------------------------------------------- */

/* Runs every layer and the final norm: fills p->hf (and, training, every layer's activations).
 * Returns 0 when out of scratch memory. */
int decoder_forward(const model_t *m, pass_t *p);

/* Logits of selected rows: out (nrows, V) = hf[rows] @ head. Returns 0 when out of memory. */
int head_logits(const model_t *m, const pass_t *p, const int64_t *rows, int64_t nrows, float *out);

/* For every row i: logp = log-softmax(hf[i] @ head / T)[target[i]] and the entropy of that
 * distribution; logits computed chunk by chunk (at most `chunk_rows` rows of (V) at once).
 * stats (N, 2) keeps each row's max and log-sum for the backward. Returns 0 when out of memory. */
int head_logprobs(const model_t *m, const pass_t *p, const int32_t *target, float temperature, float *logp,
                  float *entropy, float *stats);

/* values (N) = hf @ score. */
void head_values(const model_t *m, const pass_t *p, float *values);

/* Accumulates into the model's gradient buffers the gradient of Σ_i dlogp[i]·logp[i] (policy) or
 * Σ_i dvalue[i]·value[i] (critic), through the head and every layer. The pass must be a training
 * pass whose forward ran. Returns 0 when out of scratch memory. */
int decoder_backward_logprobs(const model_t *m, const pass_t *p, const int32_t *target, float temperature,
                              const float *stats, const float *dlogp);
int decoder_backward_values(const model_t *m, const pass_t *p, const float *dvalue);

#endif
