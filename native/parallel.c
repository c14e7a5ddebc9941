/*
 * Per-thread pools of helper threads (parallel.h).
 *
 * A job is published through one 64-bit ticket: (generation, task count, next task). A thread
 * claims task i by moving the ticket from (g, n, i) to (g, n, i + 1) with a compare-and-swap,
 * so a helper that wakes late, after its job ended, can never claim a task of the next job by
 * mistake: the generation no longer matches. The owner waits until every task is done before it
 * publishes the next job, so the job's function and context stay valid while any task runs.
 * Helpers spin for about 100 us after a job (the next product usually follows within that), then
 * sleep on a condition variable; `sleepers` and the ticket are both sequentially consistent, so
 * the owner either sees a sleeper to wake or the sleeper sees the new ticket.
 */
#define _POSIX_C_SOURCE 200809L
#include "parallel.h"

#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CPU_RELAX() _mm_pause()
#else
#define CPU_RELAX() ((void)0)
#endif

#define SPIN_NS 100000L

#define LOAD(p) __atomic_load_n((p), __ATOMIC_SEQ_CST)
#define STORE(p, v) __atomic_store_n((p), (v), __ATOMIC_SEQ_CST)

#define TICKET(gen, n, next) (((uint64_t)(gen) << 32) | ((uint64_t)(n) << 16) | (uint64_t)(next))
#define T_GEN(t) ((uint32_t)((t) >> 32))
#define T_N(t) ((int)(((t) >> 16) & 0xFFFF))
#define T_NEXT(t) ((int)((t)&0xFFFF))

typedef struct pool {
  pthread_mutex_t mu;
  pthread_cond_t wake;
  pthread_t tids[MAX_POOL_TASKS - 1];
  int helpers;  /* started */
  int sleepers; /* helpers waiting on `wake` */
  int stop;
  uint64_t ticket;
  int done; /* tasks of the current job finished */
  task_fn fn;
  void *ctx;
} pool;

static int64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000L + t.tv_nsec;
}

/* Claims and runs tasks of generation gen until none is left. */
static void work(pool *p, uint32_t gen) {
  for (;;) {
    uint64_t t = LOAD(&p->ticket);
    if (T_GEN(t) != gen || T_NEXT(t) >= T_N(t)) return;
    if (!__atomic_compare_exchange_n(&p->ticket, &t, t + 1, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) continue;
    p->fn(p->ctx, T_NEXT(t));
    __atomic_fetch_add(&p->done, 1, __ATOMIC_SEQ_CST);
  }
}

static void *helper_main(void *arg) {
  pool *p = (pool *)arg;
  uint32_t seen = T_GEN(LOAD(&p->ticket));
  for (;;) {
    const int64_t until = now_ns() + SPIN_NS;
    int spins = 0;
    while (T_GEN(LOAD(&p->ticket)) == seen && !LOAD(&p->stop)) {
      CPU_RELAX();
      if ((++spins & 63) == 0 && now_ns() > until) {
        pthread_mutex_lock(&p->mu);
        __atomic_fetch_add(&p->sleepers, 1, __ATOMIC_SEQ_CST);
        while (T_GEN(LOAD(&p->ticket)) == seen && !LOAD(&p->stop)) pthread_cond_wait(&p->wake, &p->mu);
        __atomic_fetch_sub(&p->sleepers, 1, __ATOMIC_SEQ_CST);
        pthread_mutex_unlock(&p->mu);
      }
    }
    if (LOAD(&p->stop)) return NULL;
    seen = T_GEN(LOAD(&p->ticket));
    work(p, seen);
  }
}

static pthread_key_t pool_key;
static pthread_once_t pool_key_once = PTHREAD_ONCE_INIT;

/* The owner thread exits: stop and join its helpers. */
static void pool_destroy(void *arg) {
  pool *p = (pool *)arg;
  pthread_mutex_lock(&p->mu);
  STORE(&p->stop, 1);
  pthread_cond_broadcast(&p->wake);
  pthread_mutex_unlock(&p->mu);
  for (int i = 0; i < p->helpers; i++) pthread_join(p->tids[i], NULL);
  pthread_cond_destroy(&p->wake);
  pthread_mutex_destroy(&p->mu);
  free(p);
}

static void make_key(void) { pthread_key_create(&pool_key, pool_destroy); }

/* This thread's pool with at least `want` helpers where they can be started; NULL if none. */
static pool *thread_pool(int want) {
  pthread_once(&pool_key_once, make_key);
  pool *p = (pool *)pthread_getspecific(pool_key);
  if (!p) {
    p = (pool *)calloc(1, sizeof *p);
    if (!p) return NULL;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    if (pthread_setspecific(pool_key, p) != 0) {
      free(p);
      return NULL;
    }
  }
  while (p->helpers < want && pthread_create(&p->tids[p->helpers], NULL, helper_main, p) == 0) p->helpers++;
  return p;
}

void run_tasks(int n, task_fn fn, void *ctx) {
  if (n <= 1 || n > MAX_POOL_TASKS) {
    for (int i = 0; i < n; i++) fn(ctx, i);
    return;
  }
  pool *p = thread_pool(n - 1);
  if (!p || p->helpers == 0) {
    for (int i = 0; i < n; i++) fn(ctx, i);
    return;
  }
  p->fn = fn;
  p->ctx = ctx;
  STORE(&p->done, 0);
  const uint32_t gen = T_GEN(LOAD(&p->ticket)) + 1;
  STORE(&p->ticket, TICKET(gen, n, 0));
  if (LOAD(&p->sleepers) > 0) {
    pthread_mutex_lock(&p->mu);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
  }
  work(p, gen);
  while (LOAD(&p->done) < n) CPU_RELAX();
}

/* ---- parallel_for over the fused kernels' rows ---- */

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
  int64_t n;
  int chunks;
} range_job;

static void run_chunk(void *arg, int c) {
  const range_job *j = (const range_job *)arg;
  j->fn(j->ctx, j->n * c / j->chunks, j->n * (c + 1) / j->chunks, c);
}

int parallel_for(int64_t n, int64_t grain, range_fn fn, void *ctx) {
  const int chunks = parallel_chunks(n, grain);
  if (chunks == 1) {
    if (n > 0) fn(ctx, 0, n, 0);
    return 1;
  }
  range_job j = {fn, ctx, n, chunks};
  run_tasks(chunks, run_chunk, &j);
  return chunks;
}
