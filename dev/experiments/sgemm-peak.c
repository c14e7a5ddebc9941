/*
 * OpenBLAS sgemm GFLOPS on a few of the model's shapes,
 * from C with no Node in between, for the "OpenBLAS's own sgemm" figure of docs/benchmarks.md.
 *   gcc -O2 dev/experiments/sgemm-peak.c -o sgemm-peak -lopenblas
 *   OPENBLAS_NUM_THREADS=1 ./sgemm-peak; OPENBLAS_NUM_THREADS=2 ./sgemm-peak
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

enum { ROW_MAJOR = 101, NO_TRANS = 111, TRANS = 112 };
extern void cblas_sgemm(int, int, int, int, int, int, float, const float *, int, const float *, int, float, float *, int);

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(void) {
  /* m, n, k, transA, transB */
  static const int shapes[][5] = {{512, 1536, 512, 0, 0}, {512, 512, 1536, 0, 1}, {1536, 512, 512, 1, 0}, {2048, 2048, 2048, 0, 0}};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
    const int m = shapes[s][0], n = shapes[s][1], k = shapes[s][2], ta = shapes[s][3], tb = shapes[s][4];
    float *a = malloc(sizeof(float) * m * k), *b = malloc(sizeof(float) * k * n), *c = malloc(sizeof(float) * m * n);
    for (long i = 0; i < (long)m * k; i++) a[i] = (float)(i % 7) * 0.1f;
    for (long i = 0; i < (long)k * n; i++) b[i] = (float)(i % 5) * 0.1f;
    int reps = 0;
    double t0 = now();
    while (now() - t0 < 0.5 || reps < 2) {
      cblas_sgemm(ROW_MAJOR, ta ? TRANS : NO_TRANS, tb ? TRANS : NO_TRANS, m, n, k, 1.0f, a, ta ? m : k, b, tb ? k : n, 0.0f, c, n);
      reps++;
    }
    printf("%4d x %4d x %4d transA=%d transB=%d: %6.1f GFLOPS\n", m, n, k, ta, tb, 2.0 * m * n * k * reps / (now() - t0) / 1e9);
    free(a);
    free(b);
    free(c);
  }
  return 0;
}
