/*
 * Large scratch blocks kept for reuse: a training pass's arena, the backward's buffers and the
 * head's logit chunks are the same sizes pass after pass, and a fresh multi-megabyte malloc comes
 * from new pages the kernel must zero (about a tenth of a training step, measured with perf).
 * Per thread; at most SCRATCH_SLOTS blocks are kept, the largest ones.
 */
#ifndef AGENT_R1_SCRATCH_H
#define AGENT_R1_SCRATCH_H

#include <stddef.h>

/* A 64-byte-aligned block of at least `bytes`, or NULL when out of memory. */
void *scratch_get(size_t bytes);
/* Gives a block from scratch_get back (NULL is ignored). */
void scratch_put(void *block);

#endif
