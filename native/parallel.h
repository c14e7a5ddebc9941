/*
 * Row-parallel loops for the fused kernels: plain pthreads, no pool. A call
 * splits [0, n) into at most fused_threads() contiguous chunks, runs chunk 0
 * on the calling thread and the others on fresh threads, and joins them. The
 * thread count (setFusedThreads) defaults to 1, which runs everything inline:
 * the engine already keeps both cores busy with one replica per core, and on a
 * loaded 2-core machine two threads per kernel measured no faster, often slower. Below `grain` items per extra thread, fewer
 * threads are used (a thread costs tens of microseconds to start).
 */
#ifndef AGENT_R1_PARALLEL_H
#define AGENT_R1_PARALLEL_H

#include <stdint.h>

#define MAX_FUSED_THREADS 16

/* fn(ctx, lo, hi, chunk): process items [lo, hi); chunk < the returned count. */
typedef void (*range_fn)(void *ctx, int64_t lo, int64_t hi, int chunk);

void set_fused_threads(int n);
int fused_threads(void);
/* The number of chunks parallel_for would use for n items. */
int parallel_chunks(int64_t n, int64_t grain);
/* Runs fn over [0, n) in parallel_chunks(n, grain) chunks; returns that count. */
int parallel_for(int64_t n, int64_t grain, range_fn fn, void *ctx);

#endif
