/*
 * Vectorizable float32 helpers of the row kernels (model/, kernels/): exp,
 * sigmoid, 8-lane sums, dots and maxima, an overflow-checked product of dimensions,
 * and the ROW_LOOP / GRAIN_FLOATS settings of their loops.
 */
#ifndef AGENT_R1_VEC_MATH_H
#define AGENT_R1_VEC_MATH_H

#include <stdint.h>

/*
 * The row loops are compiled three times, for AVX-512, AVX2 and the baseline, and the
 * loader picks one by the CPU (GCC function multi-versioning; Linux x86-64 only). Without
 * FMA contraction (-std=c99) and with fixed 8-lane partial sums, all give the same bits;
 * AVX2 is about 1.5-2x faster than the baseline on the exp-bound loops (softmax, SwiGLU),
 * and AVX-512 faster again (dev/LOG.md, 2026-11-26).
 */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define ROW_LOOP __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define ROW_LOOP
#endif

/* Items (floats) per extra thread below which a kernel stays on fewer threads. */
#define GRAIN_FLOATS 32768


/* ------------------------------------------------------------------------- */
/* Math helpers                                                              */
/* ------------------------------------------------------------------------- */

/*
 * exp(x) in float32, written so GCC vectorizes loops that call it (no calls, no
 * branches): x = n·ln2 + r with n = round(x·log2 e) (the 1.5·2^23 rounding trick),
 * r reduced in two steps (Cody-Waite), exp(r) by a degree-6 polynomial (Cephes'
 * expf coefficients), times 2^n built in the exponent bits. x < -87.33 gives 0
 * (as exp does below FLT_MIN, the masked entries of a softmax), x > 88 gives +inf,
 * NaN stays NaN.
 */
static inline float exp_f32(float x) {
  const float lo = -87.33654475f, hi = 88.0f;
  float xc = x < lo ? lo : x;
  xc = xc > hi ? hi : xc;
  const float magic = 12582912.0f; /* 1.5 * 2^23 */
  float t = xc * 1.44269504088896341f + magic;
  float n = t - magic;
  float r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  union {
    int32_t i;
    float f;
  } s;
  s.i = ((int32_t)n + 127) << 23; /* 2^n; n in [-126, 127] after the clamp */
  float e = p * s.f;
  e = x < lo ? 0.0f : e;
  return x > hi ? INFINITY : e;
}

/* 1 / (1 + exp(-x)), as TF.js's Sigmoid. */
static inline float sigmoid_f32(float x) { return 1.0f / (1.0f + exp_f32(-x)); }

/* Sum of a[0..n) with 8 partial sums (vectorizes; also more accurate than one running sum). */
static inline float sum8(const float *a, int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t j = 0;
  for (; j + 8 <= n; j += 8)
    for (int l = 0; l < 8; l++) acc[l] += a[j + l];
  float s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
  for (; j < n; j++) s += a[j];
  return s;
}

/* Σ a[j]·b[j] with 8 partial sums. */
static inline float dot8(const float *a, const float *b, int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t j = 0;
  for (; j + 8 <= n; j += 8)
    for (int l = 0; l < 8; l++) acc[l] += a[j + l] * b[j + l];
  float s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
  for (; j < n; j++) s += a[j] * b[j];
  return s;
}

/* max of a[0..n), n >= 1, with 8 partial maxima (NaN entries are skipped; a row holding one still comes out NaN from its exp). */
static inline float max8(const float *a, int64_t n) {
  float m = a[0];
  int64_t j = 0;
  if (n >= 8) {
    float acc[8];
    for (int l = 0; l < 8; l++) acc[l] = a[l];
    for (j = 8; j + 8 <= n; j += 8)
      for (int l = 0; l < 8; l++) acc[l] = a[j + l] > acc[l] ? a[j + l] : acc[l];
    m = acc[0];
    for (int l = 1; l < 8; l++) m = acc[l] > m ? acc[l] : m;
  }
  for (; j < n; j++) m = a[j] > m ? a[j] : m;
  return m;
}

/* a·b, or -1 when it exceeds 2^53 (no array is that long, so a length check then fails). */
static inline int64_t mul_dims(int64_t a, int64_t b) {
  if (a != 0 && b > (INT64_C(1) << 53) / a) return -1;
  return a * b;
}

#endif
