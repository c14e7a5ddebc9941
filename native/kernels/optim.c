/* The optimizer's element-wise kernels (optim.h). */
#include "optim.h"

#include <math.h>

#include "../parallel.h"
#include "../vec_math.h"

typedef struct {
  const float *w, *g, *m, *v; /* (n) each */
  float *wo, *mo, *vo;        /* (n) each: outputs (may not alias the inputs) */
  float lr, b1, ob1, b2, ob2, eps, wd, bc1, bc2, scale;
} adamw_ctx;

ROW_LOOP static void adamw_range(void *p, int64_t lo, int64_t hi, int chunk) {
  (void)chunk;
  const adamw_ctx *c = (const adamw_ctx *)p;
  for (int64_t i = lo; i < hi; i++) {
    const float g = c->scale == 1.0f ? c->g[i] : c->g[i] * c->scale;
    const float m = c->m[i] * c->b1 + g * c->ob1;
    const float v = c->v[i] * c->b2 + (g * g) * c->ob2;
    float u = (m / c->bc1) / (sqrtf(v / c->bc2) + c->eps);
    if (c->wd > 0.0f) u = u + c->w[i] * c->wd;
    c->mo[i] = m;
    c->vo[i] = v;
    c->wo[i] = c->w[i] - u * c->lr;
  }
}

void adamw_update(const float *w, const float *g, const float *m, const float *v, float *w_out, float *m_out,
                  float *v_out, int64_t n, double lr, double beta1, double beta2, double eps, double weight_decay,
                  double bc1, double bc2, double grad_scale) {
  /* Each setting rounded to float32 once, the complements taken in double first (as the TF.js engine's
     composition computes them in JavaScript): the same bits as its update. */
  adamw_ctx c = {w,
                 g,
                 m,
                 v,
                 w_out,
                 m_out,
                 v_out,
                 (float)lr,
                 (float)beta1,
                 (float)(1.0 - beta1),
                 (float)beta2,
                 (float)(1.0 - beta2),
                 (float)eps,
                 (float)weight_decay,
                 (float)bc1,
                 (float)bc2,
                 (float)grad_scale};
  parallel_for(n, GRAIN_FLOATS, adamw_range, &c);
}

ROW_LOOP double sum_squares(const float *x, int64_t n) {
  double acc[4] = {0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 4 <= n; i += 4)
    for (int l = 0; l < 4; l++) acc[l] += (double)x[i + l] * (double)x[i + l];
  double s = (acc[0] + acc[1]) + (acc[2] + acc[3]);
  for (; i < n; i++) s += (double)x[i] * (double)x[i];
  return s;
}
