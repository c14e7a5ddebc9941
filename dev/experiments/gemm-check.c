/*
 * own_gemm (native/gemm.c) against a plain double loop, outside Node, for memory checkers: every
 * operand is its own exact-size allocation, so a read or write one element past any of them is
 * caught. Every micro-kernel the CPU runs, one and three threads, odd shapes (k = 0 too) and all
 * transposes, B in float32, bfloat16 and float16, C written or accumulated into (pre-filled with
 * random values). Exits 1 on the first wrong entry.
 *
 *   gcc -O1 -g -fsanitize=address -fno-omit-frame-pointer -std=c99 -pthread -Inative \
 *     dev/experiments/gemm-check.c native/gemm.c native/gemm_x86.c native/gemm_avx2.c native/gemm_amx.c \
 *     native/parallel.c -lm -o /tmp/gemm-asan
 *   /tmp/gemm-asan
 *   gcc -O2 -g -std=c99 -pthread -Inative dev/experiments/gemm-check.c native/gemm.c native/gemm_x86.c \
 *     native/gemm_avx2.c native/gemm_amx.c native/parallel.c -lm -o /tmp/gemm-check && valgrind --error-exitcode=1 /tmp/gemm-check
 *
 * (valgrind's CPU has no AVX-512, so under it the AVX2 and portable kernels run.)
 */
#include "gemm.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static float *randoms(int64_t n, unsigned *seed) {
  float *x = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
  for (int64_t i = 0; i < n; i++) {
    *seed = *seed * 1664525u + 1013904223u;
    x[i] = (float)((*seed >> 8) & 0xFFFF) / 32768.0f - 1.0f;
  }
  return x;
}

/* n random bit patterns of dtype: bfloat16 with exponents 2^-8..2^7, float16 with exponents
 * 2^-7..2^0 and one in 16 a subnormal. Exact-size allocation. */
static uint16_t *random_halfs(int64_t n, int dtype, unsigned *seed) {
  uint16_t *x = malloc((size_t)(n > 0 ? n : 1) * sizeof(uint16_t));
  for (int64_t i = 0; i < n; i++) {
    *seed = *seed * 1664525u + 1013904223u;
    const unsigned r = *seed >> 8, sign = (r & 1u) << 15, mant = (r >> 1) & 0x3ff, e = (r >> 11) & 15;
    if (dtype == DT_BF16)
      x[i] = (uint16_t)(sign | ((119u + e) << 7) | (mant & 0x7f));
    else
      x[i] = (uint16_t)(sign | (e == 0 ? 0u : (8u + e / 2) << 10) | mant);
  }
  return x;
}

/* The value of a bf16 / f16 bit pattern, decoded independently of gemm.h's converter. */
static double half_value(uint16_t h, int dtype) {
  if (dtype == DT_BF16) {
    const uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
  }
  const int e = (h >> 10) & 31, mant = h & 0x3ff;
  const double v = e == 0 ? ldexp(mant, -24) : ldexp(mant + 1024, e - 25);
  return h & 0x8000 ? -v : v;
}

static const char *DTYPES[] = {"f32", "bf16", "f16"};

static int check(int ta, int tb, int64_t m, int64_t n, int64_t k, int dtype, int accumulate, unsigned *seed,
                 const char *what) {
  float *a = randoms(m * k, seed), *c = randoms(m * n, seed), *c0 = malloc((size_t)(m * n) * sizeof(float));
  void *b = dtype == DT_F32 ? (void *)randoms(k * n, seed) : (void *)random_halfs(k * n, dtype, seed);
  memcpy(c0, c, (size_t)(m * n) * sizeof(float));
  const int64_t lda = ta ? m : k, ldb = tb ? k : n;
  own_gemm(ta, tb, m, n, k, a, lda, b, dtype, ldb, c, n, accumulate);
  int ok = 1;
  for (int64_t i = 0; i < m && ok; i++)
    for (int64_t j = 0; j < n && ok; j++) {
      double s = accumulate ? c0[i * n + j] : 0, mag = fabs(s);
      for (int64_t p = 0; p < k; p++) {
        const int64_t bi = tb ? j * ldb + p : p * ldb + j;
        const double x = ta ? a[p * lda + i] : a[i * lda + p],
                     y = dtype == DT_F32 ? ((const float *)b)[bi] : half_value(((const uint16_t *)b)[bi], dtype);
        s += x * y;
        mag += fabs(x * y);
      }
      if (fabs(c[i * n + j] - s) > 1e-5 * (mag + 1)) {
        printf("%s %s%s: (%lld,%lld,%lld) %c%c entry (%lld,%lld) = %g, want %g\n", what, DTYPES[dtype],
               accumulate ? " +=" : "", (long long)m, (long long)n, (long long)k, ta ? 'T' : 'N', tb ? 'T' : 'N',
               (long long)i, (long long)j, c[i * n + j], s);
        ok = 0;
      }
    }
  free(a);
  free(b);
  free(c);
  free(c0);
  return ok;
}

int main(void) {
  static const int64_t shapes[][3] = {{1, 1, 1},   {1, 7, 5},    {1, 2051, 37}, {2, 3, 1},   {13, 17, 19},
                                      {37, 41, 53}, {20, 30, 1}, {513, 3, 67},  {3, 700, 5}, {12, 32, 16},
                                      {25, 65, 33}, {150, 97, 400}, {290, 70, 130}, {2, 4099, 3},
                                      {3, 5, 0},    {1, 9, 0},    {1, 33, 401}, {47, 63, 385}};
  static const char *kernels[] = {"avx512", "avx2", "portable"};
  unsigned seed = 1;
  int runs = 0;
  for (int kk = 0; kk < 3; kk++) {
    if (!own_sgemm_force_kernel(kernels[kk])) continue;
    for (int threads = 1; threads <= 3; threads += 2) {
      own_sgemm_set_threads(threads);
      for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int t = 0; t < 4; t++)
          for (int dtype = DT_F32; dtype <= DT_F16; dtype++)
            for (int acc = 0; acc <= 1; acc++) {
              if (!check(t & 1, t >> 1, shapes[s][0], shapes[s][1], shapes[s][2], dtype, acc, &seed, kernels[kk]))
                return 1;
              runs++;
            }
    }
    printf("%s: ok\n", kernels[kk]);
  }
  printf("%d products checked\n", runs);
  return 0;
}
