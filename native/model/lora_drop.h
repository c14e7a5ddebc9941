/*
 * LoRA dropout on one linear of a training pass (lora_drop.c): the adapter reads x ⊙ keep / (1 - p)
 * instead of x, keep(i, j) = 1 unless a hash of (seed, row0 + i, j) falls below p, so the backward
 * draws the same mask without storing it.
 */
#ifndef AGENT_R1_LORA_DROP_H
#define AGENT_R1_LORA_DROP_H

#include <stdint.h>

/* NULL, or p = 0: no dropout. */
typedef struct {
  float p;
  uint64_t seed;
  int64_t row0; /* the pass row of x's first row (the head runs in chunks of rows) */
} lora_drop;

/* The seed of one linear's mask from a pass's seed and the linear's index. */
uint64_t lora_drop_seed(uint64_t pass_seed, uint64_t index);

/* dst (N, in) = src ⊙ keep / (1 - p), or dst += that (add). */
void lora_drop_apply(const lora_drop *d, const float *src, float *dst, int64_t N, int64_t in, int add);

#endif
