/*
 * The optimizer's element-wise kernels, in plain C: AdamW's update of a parameter and its two
 * moments, and the squared norm of a gradient.
 */
#ifndef AGENT_R1_OPTIM_H
#define AGENT_R1_OPTIM_H

#include <stdint.h>

/*
 * g = g·scale; m' = m·β1 + g·(1-β1); v' = v·β2 + g²·(1-β2);
 * u = (m' / bc1) / (sqrt(v' / bc2) + ε) [+ w·wd]; w' = w - u·lr, over n floats, float32
 * throughout, in the order the TF.js engine's composition computes it (settings are given in
 * double and rounded once, the complements 1-β taken in double). The outputs may be the
 * inputs (in place); split across the row-kernel threads (parallel.h).
 */
void adamw_update(const float *w, const float *g, const float *m, const float *v, float *w_out, float *m_out,
                  float *v_out, int64_t n, double lr, double beta1, double beta2, double eps, double weight_decay,
                  double bc1, double bc2, double grad_scale);

/* Σ x² over n floats, accumulated in double (4 partial sums). */
double sum_squares(const float *x, int64_t n);

#endif
