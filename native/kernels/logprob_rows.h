/*
 * Token log-probabilities over rows of logits: log-softmax(logits / T)[target] and the entropy,
 * and their backward (logprob_rows.c), for the C engine's head (model/decoder.c). Both run over
 * [lo, hi) of the rows, as parallel_for's range functions.
 */
#ifndef AGENT_R1_LOGPROB_ROWS_H
#define AGENT_R1_LOGPROB_ROWS_H

#include <stdint.h>

typedef struct {
  const float *x;        /* (rows, cols): logits */
  const int32_t *target; /* (rows) */
  float *picked;         /* (rows): forward output, log p[target] */
  float *entropy;        /* (rows): forward output; backward input */
  float *stats;          /* (rows, 2): per row max(z) and log Σ exp(z - max); forward output, backward input */
  const float *dpicked;  /* (rows): backward */
  const float *dentropy; /* (rows): backward */
  float *dx;             /* (rows, cols): backward output */
  int64_t cols;
  float temperature;
} logprob_ctx;

void logprob_fwd_rows(void *p, int64_t lo, int64_t hi, int chunk);
void logprob_bwd_rows(void *p, int64_t lo, int64_t hi, int chunk);

#endif
