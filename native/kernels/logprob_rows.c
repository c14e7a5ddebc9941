/* Token log-probabilities over rows of logits and their backward (logprob_rows.h). */
#include "logprob_rows.h"

#include <math.h>

#include "../vec_math.h"

/* z = x / T; x itself when T = 1 (the common case, no division). */
static inline float scaled(float x, float T) { return T == 1.0f ? x : x / T; }

/*
 * With z = x / T (x itself when T = 1), mx = max z, e = exp(z - mx), s = Σ e:
 *   log p[j] = (z[j] - mx) - log s,  entropy = -Σ p·log p = log s - Σ e·(z - mx) / s.
 * max z = (max x) / T exactly, since rounding x / T is monotonic for T > 0.
 */
ROW_LOOP void logprob_fwd_rows(void *p, int64_t lo, int64_t hi, int chunk) {
  (void)chunk;
  const logprob_ctx *c = (const logprob_ctx *)p;
  const int64_t C = c->cols;
  const float T = c->temperature;
  for (int64_t r = lo; r < hi; r++) {
    const float *xr = c->x + r * C; /* (cols) */
    const float mx = scaled(max8(xr, C), T);
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0}, wacc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t j = 0;
    for (; j + 8 <= C; j += 8)
      for (int l = 0; l < 8; l++) {
        const float d = scaled(xr[j + l], T) - mx, e = exp_f32(d);
        acc[l] += e;
        wacc[l] += e * d;
      }
    float s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    float w = ((wacc[0] + wacc[1]) + (wacc[2] + wacc[3])) + ((wacc[4] + wacc[5]) + (wacc[6] + wacc[7]));
    for (; j < C; j++) {
      const float d = scaled(xr[j], T) - mx, e = exp_f32(d);
      s += e;
      w += e * d;
    }
    const float logs = logf(s);
    c->stats[2 * r] = mx;
    c->stats[2 * r + 1] = logs;
    c->picked[r] = (scaled(xr[c->target[r]], T) - mx) - logs;
    c->entropy[r] = logs - w / s;
  }
}

/*
 * With p = softmax(z), log p as above, H the entropy:
 *   d picked / dz[j] = [j = target] - p[j],  dH / dz[j] = -p[j]·(log p[j] + H),
 * and dx = dz / T.
 */
ROW_LOOP void logprob_bwd_rows(void *p, int64_t lo, int64_t hi, int chunk) {
  (void)chunk;
  const logprob_ctx *c = (const logprob_ctx *)p;
  const int64_t C = c->cols;
  const float T = c->temperature;
  for (int64_t r = lo; r < hi; r++) {
    const float *xr = c->x + r * C; /* (cols) */
    float *dxr = c->dx + r * C;     /* (cols) */
    const float mx = c->stats[2 * r], logs = c->stats[2 * r + 1], H = c->entropy[r];
    const float dp = c->dpicked[r], dh = c->dentropy ? c->dentropy[r] : 0.0f;
    for (int64_t j = 0; j < C; j++) {
      const float lp = (scaled(xr[j], T) - mx) - logs, pj = exp_f32(lp);
      const float dz = -dp * pj - dh * pj * (lp + H);
      dxr[j] = scaled(dz, T);
    }
    const int64_t t = c->target[r];
    dxr[t] += scaled(dp, T);
  }
}

