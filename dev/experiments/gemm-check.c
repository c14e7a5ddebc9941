/*
 * own_sgemm (native/gemm.c) against a plain double loop, outside Node, for memory checkers: every
 * operand is its own exact-size allocation, so a read or write one float past any of them is
 * caught. Every micro-kernel the CPU runs, one and three threads, odd shapes and all transposes.
 * Exits 1 on the first wrong entry.
 *
 *   gcc -O1 -g -fsanitize=address -fno-omit-frame-pointer -std=c99 -pthread -Inative \
 *     dev/experiments/gemm-check.c native/gemm.c native/gemm_x86.c native/parallel.c -lm -o /tmp/gemm-asan
 *   /tmp/gemm-asan
 *   gcc -O2 -g -std=c99 -pthread -Inative dev/experiments/gemm-check.c native/gemm.c native/gemm_x86.c \
 *     native/parallel.c -lm -o /tmp/gemm-check && valgrind --error-exitcode=1 /tmp/gemm-check
 *
 * (valgrind's CPU has no AVX-512, so under it the AVX2 and portable kernels run.)
 */
#include "gemm.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static float *randoms(int64_t n, unsigned *seed) {
  float *x = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
  for (int64_t i = 0; i < n; i++) {
    *seed = *seed * 1664525u + 1013904223u;
    x[i] = (float)((*seed >> 8) & 0xFFFF) / 32768.0f - 1.0f;
  }
  return x;
}

static int check(int ta, int tb, int64_t m, int64_t n, int64_t k, unsigned *seed, const char *what) {
  float *a = randoms(m * k, seed), *b = randoms(k * n, seed), *c = malloc((size_t)(m * n) * sizeof(float));
  const int64_t lda = ta ? m : k, ldb = tb ? k : n;
  own_sgemm(ta, tb, m, n, k, a, lda, b, ldb, c, n);
  int ok = 1;
  for (int64_t i = 0; i < m && ok; i++)
    for (int64_t j = 0; j < n && ok; j++) {
      double s = 0, mag = 0;
      for (int64_t p = 0; p < k; p++) {
        const double x = ta ? a[p * lda + i] : a[i * lda + p], y = tb ? b[j * ldb + p] : b[p * ldb + j];
        s += x * y;
        mag += fabs(x * y);
      }
      if (fabs(c[i * n + j] - s) > 1e-5 * (mag + 1)) {
        printf("%s: (%lld,%lld,%lld) %c%c entry (%lld,%lld) = %g, want %g\n", what, (long long)m, (long long)n,
               (long long)k, ta ? 'T' : 'N', tb ? 'T' : 'N', (long long)i, (long long)j, c[i * n + j], s);
        ok = 0;
      }
    }
  free(a);
  free(b);
  free(c);
  return ok;
}

int main(void) {
  static const int64_t shapes[][3] = {{1, 1, 1},   {1, 7, 5},    {1, 2051, 37}, {2, 3, 1},   {13, 17, 19},
                                      {37, 41, 53}, {20, 30, 1}, {513, 3, 67},  {3, 700, 5}, {12, 32, 16},
                                      {25, 65, 33}, {150, 97, 400}, {290, 70, 130}, {2, 4099, 3}};
  static const char *kernels[] = {"avx512", "avx2", "portable"};
  unsigned seed = 1;
  int runs = 0;
  for (int kk = 0; kk < 3; kk++) {
    if (!own_sgemm_force_kernel(kernels[kk])) continue;
    for (int threads = 1; threads <= 3; threads += 2) {
      own_sgemm_set_threads(threads);
      for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int t = 0; t < 4; t++) {
          if (!check(t & 1, t >> 1, shapes[s][0], shapes[s][1], shapes[s][2], &seed, kernels[kk])) return 1;
          runs++;
        }
    }
    printf("%s: ok\n", kernels[kk]);
  }
  printf("%d products checked\n", runs);
  return 0;
}
