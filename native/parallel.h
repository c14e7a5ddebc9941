/*
 * Work split across cores, for the matrix products (gemm.c) and the fused kernels.
 *
 * run_tasks(n, fn, ctx) runs fn(ctx, 0) ... fn(ctx, n - 1) on the calling thread and on helper
 * threads of its own pool, and returns when all are done. Each calling thread (the main thread,
 * each engine worker) has its own pool, started on first use and grown to the most helpers a
 * call has needed (n - 1); helpers spin briefly between calls, then sleep, and stop when their
 * thread exits. A call with n = 1 runs inline and starts nothing.
 *
 * parallel_for splits [0, n) into at most fused_threads() contiguous chunks (setFusedThreads;
 * default 1, which runs everything inline: the engine already keeps both cores busy with one
 * replica per core). Below `grain` items per extra chunk, fewer chunks are used.
 */
#ifndef AGENT_R1_PARALLEL_H
#define AGENT_R1_PARALLEL_H

#include <stdint.h>

#define MAX_FUSED_THREADS 16
/* Tasks per run_tasks call: the calling thread plus at most this many minus one helpers. */
#define MAX_POOL_TASKS 64

typedef void (*task_fn)(void *ctx, int task);
/* Runs fn(ctx, i) for i < n (n <= MAX_POOL_TASKS; more are run inline in order). */
void run_tasks(int n, task_fn fn, void *ctx);

/* fn(ctx, lo, hi, chunk): process items [lo, hi); chunk < the returned count. */
typedef void (*range_fn)(void *ctx, int64_t lo, int64_t hi, int chunk);

void set_fused_threads(int n);
int fused_threads(void);
/* The number of chunks parallel_for would use for n items. */
int parallel_chunks(int64_t n, int64_t grain);
/* Runs fn over [0, n) in parallel_chunks(n, grain) chunks; returns that count. */
int parallel_for(int64_t n, int64_t grain, range_fn fn, void *ctx);

#endif
