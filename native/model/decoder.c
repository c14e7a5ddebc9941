/*
 * The whole decoder over a pass (model.h): the pass's buffers, the forward through every layer,
 * the heads (logits, token log-probabilities, values) and the backward from a gradient on the
 * log-probabilities or the values.
 *
 * Memory of a training pass, per token and layer: the layer input x and x2 (2H), q and ctx
 * (2·nh·hd), k and v (2·kv·hd), gate and up (2F), the attention's log-sum-exps (nh), two rstd and
 * the LoRA products (r per adapted linear); with q/k norms (Qwen3) also the queries and keys
 * before their norm (nh·hd + kv·hd) and the norms' rstd (nh + kv). The RMSNorm outputs and silu(gate)·up are recomputed in
 * the backward from what is kept (cheap element-wise work), and the attention weights from q, k and
 * the log-sum-exps, so nothing of size T² is stored. Logits are never stored whole: the head runs
 * over chunks of rows, and the backward recomputes each chunk's logits.
 */
#define _POSIX_C_SOURCE 200112L
#include "model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../kernels/logprob_rows.h"
#include "../parallel.h"
#include "../vec_math.h"
#include "layers.h"
#include "scratch.h"

/* Logit floats one head chunk holds at most (32 Mi floats, 128 MiB). */
#define HEAD_CHUNK_FLOATS (INT64_C(1) << 25)

/* ------------------------------------------------------------------------------------------ */
/* Pass buffers                                                                               */
/* ------------------------------------------------------------------------------------------ */

/* Carves aligned buffers out of one block; with base NULL it only measures. */
typedef struct {
  char *base;
  size_t used;
} carver;

static void *carve(carver *c, size_t bytes) {
  const size_t at = (c->used + 63) & ~(size_t)63;
  c->used = at + bytes;
  return c->base ? c->base + at : NULL;
}
#define CARVE_F(c, n) ((float *)carve((c), (size_t)(n) * sizeof(float)))

static int64_t adapter_rank_sum(const layer_t *ly) {
  int64_t r = 0;
  for (int i = 0; i < LIN_COUNT; i++)
    if (ly->lin[i].la) r += ly->lin[i].rank;
  return r;
}

/* Lays out a pass's buffers in c (measuring when c->base is NULL). */
static void layout(const model_t *m, pass_t *p, carver *c, int64_t N, int64_t nseq, int train) {
  const int64_t H = m->H, qd = m->nh * m->hd, kvd = m->kv * m->hd, F = m->F, half = m->hd / 2;
  const int64_t sets = train ? m->L : 1;
  p->seqs = (seq_t *)carve(c, (size_t)nseq * sizeof(seq_t));
  p->tokens = (int32_t *)carve(c, (size_t)N * sizeof(int32_t));
  p->pos = (int32_t *)carve(c, (size_t)N * sizeof(int32_t));
  p->cos = CARVE_F(c, N * half);
  p->sin = CARVE_F(c, N * half);
  p->acts = (layer_acts *)carve(c, (size_t)sets * sizeof(layer_acts));
  /* Recomputed in the backward, so one buffer serves every layer: the RMSNorm output (and the
   * attention / MLP output that follows it) and silu(gate)·up. */
  float *h = CARVE_F(c, N * H), *act = CARVE_F(c, N * F);
  for (int64_t l = 0; l < sets; l++) {
    layer_acts a;
    memset(&a, 0, sizeof a);
    a.x = CARVE_F(c, N * H);
    a.rstd1 = CARVE_F(c, N);
    a.h1 = h;
    a.q = CARVE_F(c, N * qd);
    a.k = CARVE_F(c, N * kvd);
    a.v = CARVE_F(c, N * kvd);
    if (model_qk_norm(m)) {
      a.qr = CARVE_F(c, N * qd);
      a.kr = CARVE_F(c, N * kvd);
      a.rq = CARVE_F(c, N * m->nh);
      a.rk = CARVE_F(c, N * m->kv);
    }
    a.lse = train ? CARVE_F(c, N * m->nh) : NULL;
    a.ctx = CARVE_F(c, N * qd);
    a.x2 = CARVE_F(c, N * H);
    a.rstd2 = CARVE_F(c, N);
    a.h2 = h;
    a.gate = CARVE_F(c, N * F);
    a.up = CARVE_F(c, N * F);
    a.act = act;
    const layer_t *ly = &m->layers[train ? l : 0];
    for (int i = 0; i < LIN_COUNT; i++) {
      /* Without training every layer shares one set, sized for the largest rank. */
      int64_t r = 0;
      if (train) r = ly->lin[i].la ? ly->lin[i].rank : 0;
      else
        for (int64_t j = 0; j < m->L; j++)
          if (m->layers[j].lin[i].la && m->layers[j].lin[i].rank > r) r = m->layers[j].lin[i].rank;
      a.xa[i] = r > 0 ? CARVE_F(c, N * r) : NULL;
    }
    if (c->base) p->acts[l] = a;
  }
  p->xf = CARVE_F(c, N * H);
  p->rstdf = CARVE_F(c, N);
  p->hf = CARVE_F(c, N * H);
}

size_t pass_bytes(const model_t *m, int64_t N, int64_t nseq, int train) {
  pass_t p;
  carver c = {NULL, 0};
  layout(m, &p, &c, N, nseq, train);
  return c.used + 64;
}

pass_t *pass_create(const model_t *m, int64_t nseq, const int64_t *n, const int64_t *past, float *const *kv,
                    const int64_t *cap, const int32_t *tokens, int train) {
  int64_t N = 0;
  for (int64_t s = 0; s < nseq; s++) N += n[s];
  pass_t *p = (pass_t *)calloc(1, sizeof(pass_t));
  if (!p) return NULL;
  const size_t bytes = pass_bytes(m, N, nseq, train);
  void *block = scratch_get(bytes);
  if (!block) {
    free(p);
    return NULL;
  }
  carver c = {(char *)block, 0};
  layout(m, p, &c, N, nseq, train);
  p->arena = block;
  p->bytes = bytes;
  p->N = N;
  p->nseq = nseq;
  p->train = train;
  const int64_t half = m->hd / 2;
  int64_t row = 0;
  for (int64_t s = 0; s < nseq; s++) {
    seq_t *q = &p->seqs[s];
    q->row0 = row;
    q->n = n[s];
    q->past = past ? past[s] : 0;
    q->kv = kv ? kv[s] : NULL;
    q->cap = cap ? cap[s] : 0;
    q->parent = -1;
    for (int64_t i = 0; i < q->n; i++) p->pos[row + i] = (int32_t)(q->past + i);
    row += q->n;
  }
  memcpy(p->tokens, tokens, (size_t)N * sizeof(int32_t));
  /* cos and sin of position · frequency, computed in double as the TF.js model does */
  for (int64_t i = 0; i < N; i++)
    for (int64_t j = 0; j < half; j++) {
      const double a = (double)p->pos[i] * m->inv_freq[j];
      p->cos[i * half + j] = (float)cos(a);
      p->sin[i * half + j] = (float)sin(a);
    }
  return p;
}

void pass_free(pass_t *p) {
  if (!p) return;
  scratch_put(p->arena);
  free(p);
}

/* ------------------------------------------------------------------------------------------ */
/* Forward                                                                                    */
/* ------------------------------------------------------------------------------------------ */

/* Copies the pass's new keys and values (N, kv*hd) of `layer` into each sequence's cache. */
static void write_cache(const model_t *m, const pass_t *p, int64_t layer, const float *k, const float *v) {
  const int64_t kvd = m->kv * m->hd;
  for (int64_t s = 0; s < p->nseq; s++) {
    const seq_t *q = &p->seqs[s];
    float *K = q->kv + layer * 2 * q->cap * kvd, *V = K + q->cap * kvd; /* (cap, kvd) each */
    memcpy(K + q->past * kvd, k + q->row0 * kvd, (size_t)(q->n * kvd) * sizeof(float));
    memcpy(V + q->past * kvd, v + q->row0 * kvd, (size_t)(q->n * kvd) * sizeof(float));
  }
}

/* The LoRA dropout of linear `index` (layer · LIN_COUNT + its position; the head L · LIN_COUNT) in
 * pass p, for rows from row0: none outside training or without engine.lora.dropout. Each linear
 * of each pass draws its own mask (the seed mixes the pass's seed with the index). */
static lora_drop drop_of(const model_t *m, const pass_t *p, int64_t index, int64_t row0) {
  lora_drop d = {0.0f, 0, row0};
  if (p->train && m->lora_dropout > 0.0f) {
    d.p = m->lora_dropout;
    d.seed = lora_drop_seed(p->dropout_seed, (uint64_t)index);
  }
  return d;
}

static void layer_drops(const model_t *m, const pass_t *p, int64_t l, lora_drop *d) {
  for (int i = 0; i < LIN_COUNT; i++) d[i] = drop_of(m, p, l * LIN_COUNT + i, 0);
}

int decoder_forward(const model_t *m, pass_t *p) {
  const int64_t N = p->N, H = m->H, F = m->F;
  embed_forward(m, p->tokens, N, p->acts[0].x);
  for (int64_t l = 0; l < m->L; l++) {
    const layer_t *ly = &m->layers[l];
    layer_acts *a = &p->acts[p->train ? l : 0];
    const linear_t *lin = ly->lin;
    lora_drop d[LIN_COUNT];
    layer_drops(m, p, l, d);
    float *h = a->h1; /* (N, H) scratch: RMSNorm output, then each block's output */
    /* attention block: x2 = x + o(attention(rope(q(h1)), rope(k(h1)), v(h1))) */
    rmsnorm_forward(a->x, ly->ln1, h, a->rstd1, N, H, m->eps);
    /* with q/k norms the projections land in qr, kr and are normalized per head into q, k */
    if (!linear_forward(&lin[LIN_Q], h, N, ly->qn ? a->qr : a->q, a->xa[LIN_Q], &d[LIN_Q]) ||
        !linear_forward(&lin[LIN_K], h, N, ly->qn ? a->kr : a->k, a->xa[LIN_K], &d[LIN_K]) ||
        !linear_forward(&lin[LIN_V], h, N, a->v, a->xa[LIN_V], &d[LIN_V]))
      return 0;
    if (ly->qn) {
      rmsnorm_forward(a->qr, ly->qn, a->q, a->rq, N * m->nh, m->hd, m->eps);
      rmsnorm_forward(a->kr, ly->kn, a->k, a->rk, N * m->kv, m->hd, m->eps);
    }
    rope_apply(a->q, p->cos, p->sin, N, m->nh, m->hd, 0);
    rope_apply(a->k, p->cos, p->sin, N, m->kv, m->hd, 0);
    if (!p->train && p->seqs[0].kv) write_cache(m, p, l, a->k, a->v);
    if (!attention_forward(m, p, l, a->q, a->k, a->v, a->ctx, a->lse)) return 0;
    if (!linear_forward(&lin[LIN_O], a->ctx, N, h, a->xa[LIN_O], &d[LIN_O])) return 0;
    residual_add(a->x, h, a->x2, N * H);
    /* MLP block: out = x2 + down(silu(gate(h2)) · up(h2)) */
    rmsnorm_forward(a->x2, ly->ln2, h, a->rstd2, N, H, m->eps);
    if (!linear_forward(&lin[LIN_GATE], h, N, a->gate, a->xa[LIN_GATE], &d[LIN_GATE]) ||
        !linear_forward(&lin[LIN_UP], h, N, a->up, a->xa[LIN_UP], &d[LIN_UP]))
      return 0;
    swiglu_forward(a->gate, a->up, a->act, N * F);
    if (!linear_forward(&lin[LIN_DOWN], a->act, N, h, a->xa[LIN_DOWN], &d[LIN_DOWN])) return 0;
    float *out = l + 1 < m->L ? p->acts[p->train ? l + 1 : 0].x : p->xf; /* (N, H) */
    residual_add(a->x2, h, out, N * H);
  }
  rmsnorm_forward(p->xf, m->norm, p->hf, p->rstdf, N, H, m->eps);
  return 1;
}

/* ------------------------------------------------------------------------------------------ */
/* Heads                                                                                      */
/* ------------------------------------------------------------------------------------------ */

int head_logits(const model_t *m, const pass_t *p, const int64_t *rows, int64_t nrows, float *out) {
  const int64_t H = m->H;
  float *x = (float *)malloc((size_t)(nrows * H) * sizeof(float)); /* (nrows, H) */
  float *xa = m->head.la ? (float *)malloc((size_t)(nrows * m->head.rank) * sizeof(float)) : NULL;
  int ok = x && (!m->head.la || xa);
  if (ok) {
    for (int64_t i = 0; i < nrows; i++) memcpy(x + i * H, p->hf + rows[i] * H, (size_t)H * sizeof(float));
    ok = linear_forward(&m->head, x, nrows, out, xa, NULL); /* sampling: no dropout */
  }
  free(x);
  free(xa);
  return ok;
}

static int64_t chunk_rows(const model_t *m, int64_t N) {
  int64_t r = HEAD_CHUNK_FLOATS / m->V;
  if (r < 1) r = 1;
  return r < N ? r : N;
}

int head_logprobs(const model_t *m, const pass_t *p, const int32_t *target, float temperature, float *logp,
                  float *entropy, float *stats) {
  const int64_t N = p->N, V = m->V, H = m->H, R = chunk_rows(m, N);
  float *logits = (float *)scratch_get((size_t)(R * V) * sizeof(float)); /* (R, V) */
  float *xa = m->head.la ? (float *)malloc((size_t)(R * m->head.rank) * sizeof(float)) : NULL;
  if (!logits || (m->head.la && !xa)) {
    scratch_put(logits);
    free(xa);
    return 0;
  }
  int ok = 1;
  for (int64_t r0 = 0; r0 < N && ok; r0 += R) {
    const int64_t rows = N - r0 < R ? N - r0 : R;
    const lora_drop d = drop_of(m, p, m->L * LIN_COUNT, r0);
    ok = linear_forward(&m->head, p->hf + r0 * H, rows, logits, xa, &d);
    logprob_ctx c = {logits, target + r0, logp + r0, entropy + r0, stats + 2 * r0, NULL, NULL, NULL, V, temperature};
    parallel_for(rows, GRAIN_FLOATS / V + 1, logprob_fwd_rows, &c);
  }
  scratch_put(logits);
  free(xa);
  return ok;
}

void head_values(const model_t *m, const pass_t *p, float *values) {
  for (int64_t i = 0; i < p->N; i++) values[i] = dot8(p->hf + i * m->H, m->score, m->H);
}

/* ------------------------------------------------------------------------------------------ */
/* Backward                                                                                   */
/* ------------------------------------------------------------------------------------------ */

/* Scratch of the backward: the residual stream's gradient and the blocks' inner gradients. */
typedef struct {
  float *dx, *dh;       /* (N, H) */
  float *dq, *dctx;     /* (N, nh*hd) */
  float *dk, *dv;       /* (N, kv*hd) */
  float *dkr;           /* (N, kv*hd) with q/k norms: the keys' gradient before the norm; else NULL */
  float *dgate, *dup;   /* (N, F); dup also holds d act first */
  void *block;
} grads_t;

static int grads_alloc(const model_t *m, int64_t N, grads_t *g) {
  const int64_t H = m->H, qd = m->nh * m->hd, kvd = m->kv * m->hd, F = m->F;
  carver c = {NULL, 0};
  for (int pass = 0; pass < 2; pass++) {
    g->dx = CARVE_F(&c, N * H);
    g->dh = CARVE_F(&c, N * H);
    g->dq = CARVE_F(&c, N * qd);
    g->dctx = CARVE_F(&c, N * qd);
    g->dk = CARVE_F(&c, N * kvd);
    g->dv = CARVE_F(&c, N * kvd);
    g->dkr = model_qk_norm(m) ? CARVE_F(&c, N * kvd) : NULL;
    g->dgate = CARVE_F(&c, N * F);
    g->dup = CARVE_F(&c, N * F);
    if (pass == 0) {
      g->block = scratch_get(c.used + 64);
      if (!g->block) return 0;
      c.base = (char *)g->block;
      c.used = 0;
    }
  }
  return 1;
}

/* From g->dh (N, H) = the gradient at hf: the final norm, every layer and the embedding backward. */
static int layers_backward(const model_t *m, const pass_t *p, grads_t *g) {
  const int64_t N = p->N, H = m->H, F = m->F;
  memset(g->dx, 0, (size_t)(N * H) * sizeof(float));
  if (!rmsnorm_backward(p->xf, m->norm, p->rstdf, g->dh, g->dx, m->dnorm, N, H)) return 0;
  for (int64_t l = m->L - 1; l >= 0; l--) {
    const layer_t *ly = &m->layers[l];
    const layer_acts *a = &p->acts[l];
    const linear_t *lin = ly->lin;
    lora_drop d[LIN_COUNT];
    layer_drops(m, p, l, d);
    float *h = a->h1; /* (N, H) scratch: recomputed RMSNorm outputs */
    /* MLP block; g->dx is d out = d x2 (residual) + d mlp */
    rmsnorm_forward(a->x2, ly->ln2, h, a->rstd2, N, H, m->eps);
    swiglu_forward(a->gate, a->up, a->act, N * F);
    if (!linear_backward(&lin[LIN_DOWN], a->act, a->xa[LIN_DOWN], g->dx, N, g->dup, 0, &d[LIN_DOWN])) return 0; /* d act */
    swiglu_backward(a->gate, a->up, g->dup, g->dgate, g->dup, N * F); /* dup read as d act, then written */
    if (!linear_backward(&lin[LIN_GATE], h, a->xa[LIN_GATE], g->dgate, N, g->dh, 0, &d[LIN_GATE]) ||
        !linear_backward(&lin[LIN_UP], h, a->xa[LIN_UP], g->dup, N, g->dh, 1, &d[LIN_UP]))
      return 0;
    if (!rmsnorm_backward(a->x2, ly->ln2, a->rstd2, g->dh, g->dx, ly->dln2, N, H)) return 0; /* dx = d x2 */
    /* attention block */
    if (!linear_backward(&lin[LIN_O], a->ctx, a->xa[LIN_O], g->dx, N, g->dctx, 0, &d[LIN_O])) return 0;
    if (!attention_backward(m, p, a->q, a->k, a->v, a->ctx, a->lse, g->dctx, g->dq, g->dk, g->dv)) return 0;
    rope_apply(g->dq, p->cos, p->sin, N, m->nh, m->hd, 1);
    rope_apply(g->dk, p->cos, p->sin, N, m->kv, m->hd, 1);
    float *dq = g->dq, *dk = g->dk;
    if (ly->qn) { /* through the q/k norms; dctx is free once the attention's backward ran */
      dq = g->dctx;
      dk = g->dkr;
      memset(dq, 0, (size_t)(N * m->nh * m->hd) * sizeof(float));
      memset(dk, 0, (size_t)(N * m->kv * m->hd) * sizeof(float));
      if (!rmsnorm_backward(a->qr, ly->qn, a->rq, g->dq, dq, ly->dqn, N * m->nh, m->hd) ||
          !rmsnorm_backward(a->kr, ly->kn, a->rk, g->dk, dk, ly->dkn, N * m->kv, m->hd))
        return 0;
    }
    rmsnorm_forward(a->x, ly->ln1, h, a->rstd1, N, H, m->eps);
    if (!linear_backward(&lin[LIN_Q], h, a->xa[LIN_Q], dq, N, g->dh, 0, &d[LIN_Q]) ||
        !linear_backward(&lin[LIN_K], h, a->xa[LIN_K], dk, N, g->dh, 1, &d[LIN_K]) ||
        !linear_backward(&lin[LIN_V], h, a->xa[LIN_V], g->dv, N, g->dh, 1, &d[LIN_V]))
      return 0;
    if (!rmsnorm_backward(a->x, ly->ln1, a->rstd1, g->dh, g->dx, ly->dln1, N, H)) return 0; /* dx = d x */
  }
  embed_backward(m, p->tokens, N, g->dx);
  return 1;
}

int decoder_backward_logprobs(const model_t *m, const pass_t *p, const int32_t *target, float temperature,
                              const float *stats, const float *dlogp) {
  const int64_t N = p->N, V = m->V, H = m->H, R = chunk_rows(m, N);
  grads_t g;
  if (!grads_alloc(m, N, &g)) return 0;
  float *logits = (float *)scratch_get((size_t)(R * V) * sizeof(float)); /* (R, V): logits, then their gradient */
  float *xa = m->head.la ? (float *)malloc((size_t)(R * m->head.rank) * sizeof(float)) : NULL;
  float *ent = (float *)calloc((size_t)R, sizeof(float)); /* entropies: unused (no entropy gradient) */
  int ok = logits && ent && (!m->head.la || xa);
  for (int64_t r0 = 0; r0 < N && ok; r0 += R) {
    const int64_t rows = N - r0 < R ? N - r0 : R;
    const lora_drop d = drop_of(m, p, m->L * LIN_COUNT, r0);
    ok = linear_forward(&m->head, p->hf + r0 * H, rows, logits, xa, &d);
    /* in place: each row reads its logits and writes their gradient */
    logprob_ctx c = {logits, target + r0, NULL, ent, (float *)stats + 2 * r0, dlogp + r0, NULL, logits, V, temperature};
    parallel_for(rows, GRAIN_FLOATS / V + 1, logprob_bwd_rows, &c);
    ok = ok && linear_backward(&m->head, p->hf + r0 * H, xa, logits, rows, g.dh + r0 * H, 0, &d);
  }
  scratch_put(logits);
  free(xa);
  free(ent);
  ok = ok && layers_backward(m, p, &g);
  scratch_put(g.block);
  return ok;
}

int decoder_backward_values(const model_t *m, const pass_t *p, const float *dvalue) {
  const int64_t N = p->N, H = m->H;
  grads_t g;
  if (!grads_alloc(m, N, &g)) return 0;
  for (int64_t i = 0; i < N; i++) {
    float *dh = g.dh + i * H;
    const float *hf = p->hf + i * H;
    for (int64_t j = 0; j < H; j++) dh[j] = dvalue[i] * m->score[j];
    if (m->dscore)
      for (int64_t j = 0; j < H; j++) m->dscore[j] += dvalue[i] * hf[j];
  }
  const int ok = layers_backward(m, p, &g);
  scratch_put(g.block);
  return ok;
}
