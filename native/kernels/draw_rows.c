/*
 * Inverse-CDF draws over rows of logits (draw_rows.h). Per row, z_j = (x_j - max) / T:
 *   pass 1: S = Σ exp(z_j), in blocks of BLOCK terms (each block summed in float32 with 8 partial
 *           sums, the blocks in float64, in order);
 *   pass 2: walks the same block sums, in the same order, to the block where u·S is reached, then
 *           that block term by term; the token is the first j whose running sum passes u·S.
 * log p(j) = z_j - log S in float64. Both passes compute the same terms with the same exp, so
 * the walk ends inside the row; a rounding gap at the very end falls back to the last token
 * with mass. A temperature below TINY_T draws uniformly among the tokens at the maximum.
 * A row that holds NaN or +Infinity, or no finite logit at all, draws nothing: its token is a
 * DRAW_* code and its logprob the column at fault (draw_rows.h).
 */
#include "draw_rows.h"

#include <math.h>

#include "../vec_math.h"

enum { BLOCK = 512 };
/* Below this temperature z_j is computed in float64 terms as 0 or -inf (as sampling.ts does);
 * float32 cannot hold 1 / T. */
#define TINY_T 1e-30

/* e[0..n) = exp((x[j] - max) / t); returns their float32 sum (8 partial sums). */
ROW_LOOP static float block_terms(const float *x, int64_t n, float max, float t, float *e) {
  for (int64_t j = 0; j < n; j++) e[j] = exp_f32((x[j] - max) / t);
  return sum8(e, n);
}

/* The row's maximum and its first column; *nan is set when the row holds a NaN (which the
 * maximum skips). */
ROW_LOOP static float row_max(const float *x, int64_t n, int64_t *first, int *nan) {
  float m = -INFINITY;
  int bad = 0;
  for (int64_t j = 0; j < n; j++) {
    m = x[j] > m ? x[j] : m;
    bad |= x[j] != x[j];
  }
  *nan = bad;
  *first = 0;
  for (int64_t j = 0; j < n; j++)
    if (x[j] == m) {
      *first = j;
      break;
    }
  return m;
}

static void draw_one(const float *x, int64_t n, double temperature, double u, int32_t *token, double *logprob) {
  float e[BLOCK];
  int64_t first = 0;
  int nan = 0;
  const float max = row_max(x, n, &first, &nan), t = (float)temperature;
  if (nan || !isfinite(max)) { /* nothing to draw from: say why, and where */
    int64_t at = first;
    if (nan)
      for (at = 0; at < n && x[at] == x[at]; at++) {
      }
    *token = nan ? DRAW_NAN : max > 0 ? DRAW_INF : DRAW_NO_FINITE;
    *logprob = (double)at;
    return;
  }
  if (temperature < TINY_T) { /* every token below the maximum has probability 0: uniform over the ties */
    int64_t ties = 0;
    for (int64_t j = 0; j < n; j++) ties += x[j] == max;
    int64_t pick = (int64_t)(u * (double)ties);
    for (int64_t j = first; j < n; j++)
      if (x[j] == max && pick-- == 0) {
        *token = (int32_t)j;
        break;
      }
    *logprob = ties == 1 ? 0.0 : -log((double)ties);
    return;
  }
  double s = 0.0;
  for (int64_t b = 0; b < n; b += BLOCK) s += block_terms(x + b, n - b < BLOCK ? n - b : BLOCK, max, t, e);
  const double target = u * s, lse = log(s);
  double acc = 0.0;
  int64_t last = first; /* the last token with mass seen so far */
  for (int64_t b = 0; b < n; b += BLOCK) {
    const int64_t len = n - b < BLOCK ? n - b : BLOCK;
    const float bs = block_terms(x + b, len, max, t, e);
    if (acc + bs <= target) {
      acc += bs;
      for (int64_t j = len - 1; j >= 0; j--)
        if (e[j] > 0.0f) {
          last = b + j;
          break;
        }
      continue;
    }
    for (int64_t j = 0; j < len; j++) {
      if (e[j] > 0.0f) last = b + j;
      acc += e[j];
      if (target < acc) break;
    }
    break;
  }
  *token = (int32_t)last;
  *logprob = (double)((x[last] - max) / t) - lse;
}

void draw_rows(void *p, int64_t lo, int64_t hi, int chunk) {
  (void)chunk;
  const draw_ctx *c = (const draw_ctx *)p;
  for (int64_t r = lo; r < hi; r++)
    draw_one(c->logits[r], c->cols, c->temperature[r], c->u[r], &c->token[r], &c->logprob[r]);
}
