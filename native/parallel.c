/* Row-parallel loops on pthreads; see parallel.h. */
#define _POSIX_C_SOURCE 200809L
#include "parallel.h"

#include <pthread.h>

static int g_threads = 1;

void set_fused_threads(int n) { g_threads = n < 1 ? 1 : n > MAX_FUSED_THREADS ? MAX_FUSED_THREADS : n; }

int fused_threads(void) { return g_threads; }

int parallel_chunks(int64_t n, int64_t grain) {
  int64_t t = g_threads;
  if (grain < 1) grain = 1;
  if (t > n / grain) t = n / grain;
  return t < 1 ? 1 : (int)t;
}

typedef struct {
  range_fn fn;
  void *ctx;
  int64_t lo, hi;
  int chunk;
} job_t;

static void *run_job(void *p) {
  job_t *j = (job_t *)p;
  j->fn(j->ctx, j->lo, j->hi, j->chunk);
  return NULL;
}

int parallel_for(int64_t n, int64_t grain, range_fn fn, void *ctx) {
  int chunks = parallel_chunks(n, grain);
  if (chunks == 1) {
    if (n > 0) fn(ctx, 0, n, 0);
    return 1;
  }
  job_t jobs[MAX_FUSED_THREADS];
  pthread_t tids[MAX_FUSED_THREADS];
  int started[MAX_FUSED_THREADS] = {0};
  for (int c = 0; c < chunks; c++) {
    jobs[c].fn = fn;
    jobs[c].ctx = ctx;
    jobs[c].lo = n * c / chunks;
    jobs[c].hi = n * (c + 1) / chunks;
    jobs[c].chunk = c;
  }
  for (int c = 1; c < chunks; c++) started[c] = pthread_create(&tids[c], NULL, run_job, &jobs[c]) == 0;
  run_job(&jobs[0]);
  /* A thread that failed to start runs its chunk here. */
  for (int c = 1; c < chunks; c++) {
    if (started[c]) pthread_join(tids[c], NULL);
    else run_job(&jobs[c]);
  }
  return chunks;
}
