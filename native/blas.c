/*
 * The matrix-product library's front door (blas.h): which implementation runs (the project's own
 * kernels, gemm.c, or the system BLAS the build found), its thread count, and blas_gemm, which the
 * C engine's decoder (model/) and the addon's gemm bindings call. No Node-API here: the bindings
 * are in agent_r1_native.c.
 */
#include "blas.h"
#include "gemm.h"

#include <stdio.h>

#ifdef AGENT_R1_SYSTEM_BLAS
/* The CBLAS entry point, declared here so no particular cblas.h is needed. */
enum { ROW_MAJOR = 101, NO_TRANS = 111, TRANS = 112 };
extern void cblas_sgemm(int order, int transA, int transB, int m, int n, int k, float alpha, const float *a, int lda,
                        const float *b, int ldb, float beta, float *c, int ldc);
#endif
#ifdef AGENT_R1_OPENBLAS
extern void openblas_set_num_threads(int n);
extern char *openblas_get_config(void);
#endif

/* The matrix products blas_gemm runs: the own kernels unless blas_use_system(1) chose the system BLAS. */
static int use_system_blas = 0;
static int threads_set = 1;

int blas_has_system(void) {
#ifdef AGENT_R1_SYSTEM_BLAS
  return 1;
#else
  return 0;
#endif
}

int blas_use_system(int on) {
  if (on && !blas_has_system()) return 0;
  use_system_blas = on ? 1 : 0;
  return 1;
}

int blas_uses_system(void) { return use_system_blas; }

void blas_set_threads(int n) {
  threads_set = n;
  own_sgemm_set_threads(n);
#ifdef AGENT_R1_OPENBLAS
  openblas_set_num_threads(n);
#endif
}

int blas_threads(void) { return threads_set; }

void blas_system_name(char *buf, size_t size) {
  buf[0] = 0;
#ifdef AGENT_R1_SYSTEM_BLAS
#ifdef AGENT_R1_OPENBLAS
  const char *config = openblas_get_config();
  snprintf(buf, size, "%s", config ? config : AGENT_R1_SYSTEM_BLAS);
#else
  snprintf(buf, size, "%s", AGENT_R1_SYSTEM_BLAS);
#endif
#else
  (void)size;
#endif
}

void blas_gemm(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const void *b,
               int b_dtype, int64_t ldb, float *c, int64_t ldc, int accumulate) {
  if (m <= 0 || n <= 0) return;
#ifdef AGENT_R1_SYSTEM_BLAS
  if (use_system_blas && b_dtype == DT_F32 && k > 0) {
    cblas_sgemm(ROW_MAJOR, trans_a ? TRANS : NO_TRANS, trans_b ? TRANS : NO_TRANS, (int)m, (int)n, (int)k, 1.0f, a,
                lda > 0 ? (int)lda : 1, (const float *)b, ldb > 0 ? (int)ldb : 1, accumulate ? 1.0f : 0.0f, c,
                ldc > 0 ? (int)ldc : 1);
    return;
  }
#endif
  own_gemm(trans_a, trans_b, m, n, k, a, lda, b, b_dtype, ldb, c, ldc, accumulate);
}
