/*
 * The decoder's layers as paired forward / backward functions (layers.c); shapes as in model.h.
 * Functions returning int return 0 when a scratch allocation failed (nothing else can fail).
 */
#ifndef AGENT_R1_LAYERS_H
#define AGENT_R1_LAYERS_H

#include "lora_drop.h"
#include "model.h"

/* x (N, H) = the embeddings of tokens (N). */
void embed_forward(const model_t *m, const int32_t *tokens, int64_t N, float *x);
/* The embedding's gradient (the head's, when tied) += dx (N, H) at the tokens' rows. */
void embed_backward(const model_t *m, const int32_t *tokens, int64_t N, const float *dx);

/* y (N, H) = x · rstd · w with rstd (N) = 1 / sqrt(mean(x²) + eps) per row. */
void rmsnorm_forward(const float *x, const float *w, float *y, float *rstd, int64_t N, int64_t H, float eps);
/* dx (N, H) += the input gradient for dy (N, H); dw (H) += the weight's (when not NULL). */
int rmsnorm_backward(const float *x, const float *w, const float *rstd, const float *dy, float *dx, float *dw,
                     int64_t N, int64_t H);

/* y (N, out) = x (N, in) @ w [+ bias] [+ scale · (drop(x) @ la) @ lb]; xa (N, r) receives drop(x) @ la. */
int linear_forward(const linear_t *lin, const float *x, int64_t N, float *y, float *xa, const lora_drop *drop);
/* dx (N, in) = (or += when accumulate_dx) the input gradient for dy (N, out), unless dx is NULL;
 * the linear's gradient accumulators += theirs; drop as the forward's. */
int linear_backward(const linear_t *lin, const float *x, const float *xa, const float *dy, int64_t N, float *dx,
                    int accumulate_dx, const lora_drop *drop);

/* Rotates x (N, heads, hd) in place by the angles of cos, sin (N, hd/2); inverse rotates back. */
void rope_apply(float *x, const float *cos, const float *sin, int64_t N, int64_t heads, int64_t hd, int inverse);

/* ctx (N, nh*hd) = causal attention of q over each sequence's keys and values (the pass's k, v
 * (N, kv*hd) for a training pass, else each sequence's cache at `layer`); lse (N, nh) if not NULL. */
int attention_forward(const model_t *m, const pass_t *p, int64_t layer, const float *q, const float *k,
                      const float *v, float *ctx, float *lse);
/* dq (N, nh*hd), dk, dv (N, kv*hd) written, for a training pass. */
int attention_backward(const model_t *m, const pass_t *p, const float *q, const float *k, const float *v,
                       const float *ctx, const float *lse, const float *dctx, float *dq, float *dk, float *dv);

/* act (n) = silu(gate) · up; the backward writes dgate, dup (n). */
void swiglu_forward(const float *gate, const float *up, float *act, int64_t n);
void swiglu_backward(const float *gate, const float *up, const float *dact, float *dgate, float *dup, int64_t n);

/* y (n) = a + b (y may be a or b). */
void residual_add(const float *a, const float *b, float *y, int64_t n);

#endif
