/*
 * One token per row drawn from softmax(logits / T) by the inverse CDF (draw_rows.c), for the
 * native engine's sampler: the untruncated draws of src/engine/sampling.ts, in C over the whole
 * vocabulary. Runs over [lo, hi) of the rows, as a parallel_for range function.
 */
#ifndef AGENT_R1_DRAW_ROWS_H
#define AGENT_R1_DRAW_ROWS_H

#include <stdint.h>

/* Token codes of a row with nothing to draw from (its logprob is then the column at fault). */
enum { DRAW_NAN = -1, DRAW_INF = -2, DRAW_NO_FINITE = -3 };

typedef struct {
  const float *const *logits; /* (rows) pointers to (cols) logits each */
  const double *temperature;  /* (rows), > 0 */
  const double *u;            /* (rows) uniforms in [0, 1) */
  int32_t *token;             /* (rows) output; a DRAW_* code for a row that is not finite */
  double *logprob;            /* (rows) output: log p(token) at the row's temperature */
  int64_t cols;
} draw_ctx;

void draw_rows(void *p, int64_t lo, int64_t hi, int chunk);

#endif
