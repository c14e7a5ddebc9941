/*
 * The addon's module entry and the bindings of the matrix-product library (blas.c, gemm.c):
 * batched single-precision products called on Float32Array views without copying, the choice
 * of implementation and threads; the C engine's decoder is in model/, its optimizer and draw
 * kernels in kernel_bindings.c.
 *
 * Matrix products run on the project's own kernels (gemm.c), always built, or
 * on the system BLAS (cblas_sgemm of OpenBLAS or Accelerate) when the build
 * found one (binding.gyp defines AGENT_R1_SYSTEM_BLAS); setBlas chooses.
 *
 * Exports:
 *   gemm(a, b, c, batch, m, n, k, transA, transB, aIndex, bIndex) -> undefined
 *     For i in [0, batch):  C_i (m, n) = op(A_{aIndex[i]}) @ op(B_{bIndex[i]})
 *       a: Float32Array of A items, each m*k floats, row-major:
 *          (m, k) when transA is false, (k, m) when transA is true;
 *       b: Float32Array of B items, each k*n floats: (k, n), or (n, k) when transB;
 *       c: Float32Array of at least batch*m*n floats, written (never read);
 *       aIndex / bIndex: Int32Array of length batch naming the item of a / b
 *          that output item i uses (batch broadcasting), or null / undefined
 *          for item i itself.
 *     Every size and index is checked before BLAS runs: a bad argument raises
 *     a JavaScript TypeError / RangeError naming it.
 *   gemmEx(a, b, c, m, n, k, transA, transB, bDtype, accumulate?) -> undefined
 *     C (m, n) = op(A) @ op(B), or C += op(A) @ op(B) when accumulate (default
 *     false), through blas_gemm (blas.h), as the native engine multiplies:
 *       a: Float32Array of at least m*k floats: (m, k), or (k, m) when transA;
 *       b: at least k*n elements: (k, n), or (n, k) when transB; a Float32Array
 *          when bDtype is "f32", a Uint16Array of bfloat16 / float16 bit
 *          patterns when it is "bf16" / "f16" (widened to float32 as read);
 *       c: Float32Array of at least m*n floats, written (read too when accumulating).
 *     Checked as gemm's arguments are.
 *   setBlas("own" | "system"): which matrix products gemm runs (process-wide;
 *     default "own"); "system" throws when the build has no system BLAS.
 *   setGemmKernel("auto" | "avx512" | "avx2" | "portable") -> boolean: forces the
 *     own kernels' micro-kernel (false, and no change, when the CPU lacks it).
 *   setThreads(n) / getThreads(): matrix-product threads per call (process-wide,
 *     both implementations).
 *   setFusedThreads(n) / getFusedThreads(): threads of the fused kernels (default 1).
 *   info() -> { blas: "own" | "system", system: string | null, kernel: string,
 *     threads: number, fusedThreads: number }: the implementation in use, the
 *     system BLAS built in (its name and configuration, or null), and the own
 *     kernels' micro-kernel ("avx512", "avx2" or "portable").
 *   The kernels of kernel_bindings.c (AdamW, the squared norm, token draws) and the
 *   decoder of model/model_napi.c.
 *
 * Plain Node-API (node_api.h): no C++ wrapper, no npm dependency.
 */
#include "blas.h"
#include "gemm.h"
#include "napi_args.h"
#include "parallel.h"

#include <stdio.h>
#include <string.h>

int register_kernel_bindings(napi_env env, napi_value exports); /* kernel_bindings.c */
int register_model_ops(napi_env env, napi_value exports); /* model/model_napi.c */

/*
 * Checks that every item an index array names lies inside its array:
 * (index + 1) * item <= length. Without an index array, item batch-1 is the last used.
 */
static int check_items(napi_env env, const char *arr, const char *idx_name, const int32_t *idx, int64_t batch,
                       int64_t item, int64_t length) {
  char msg[200];
  int64_t last = batch - 1;
  if (idx) {
    last = -1;
    for (int64_t i = 0; i < batch; i++) {
      if (idx[i] < 0) {
        snprintf(msg, sizeof msg, "gemm: %s[%lld] = %d is negative", idx_name, (long long)i, (int)idx[i]);
        napi_throw_range_error(env, NULL, msg);
        return 0;
      }
      if (idx[i] > last) last = idx[i];
    }
  }
  if (batch > 0 && item > 0 && (last + 1) > length / item) {
    snprintf(msg, sizeof msg, "gemm: %s holds %lld floats, too short for item %lld of %lld floats", arr, (long long)length,
             (long long)last, (long long)item);
    napi_throw_range_error(env, NULL, msg);
    return 0;
  }
  return 1;
}

static napi_value gemm(napi_env env, napi_callback_info info) {
  size_t argc = 11;
  napi_value argv[11];
  CHECK_NAPI(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc < 9) return fail_type(env, "gemm(a, b, c, batch, m, n, k, transA, transB, aIndex?, bIndex?) needs at least 9 arguments");

  float *a, *b, *c;
  int64_t a_len, b_len, c_len, batch, m, n, k, ai_len = 0, bi_len = 0;
  int ta, tb;
  int32_t *ai = NULL, *bi = NULL;
  static const char *fn = "gemm";
  if (!arg_f32(env, argv[0], fn, "a", &a, &a_len) || !arg_f32(env, argv[1], fn, "b", &b, &b_len) ||
      !arg_f32(env, argv[2], fn, "c", &c, &c_len) || !arg_dim(env, argv[3], fn, "batch", &batch) ||
      !arg_dim(env, argv[4], fn, "m", &m) || !arg_dim(env, argv[5], fn, "n", &n) || !arg_dim(env, argv[6], fn, "k", &k) ||
      !arg_flag(env, argv[7], fn, "transA", &ta) || !arg_flag(env, argv[8], fn, "transB", &tb))
    return NULL;
  if (argc > 9 && !arg_i32_or_null(env, argv[9], fn, "aIndex", &ai, &ai_len)) return NULL;
  if (argc > 10 && !arg_i32_or_null(env, argv[10], fn, "bIndex", &bi, &bi_len)) return NULL;

  char msg[200];
  if (ai && ai_len != batch) {
    snprintf(msg, sizeof msg, "gemm: aIndex has %lld entries, expected batch = %lld", (long long)ai_len, (long long)batch);
    return fail_range(env, msg);
  }
  if (bi && bi_len != batch) {
    snprintf(msg, sizeof msg, "gemm: bIndex has %lld entries, expected batch = %lld", (long long)bi_len, (long long)batch);
    return fail_range(env, msg);
  }
  const int64_t a_item = m * k, b_item = k * n, c_item = m * n; /* each < 2^62: no overflow */
  if (c_item > 0 && batch > c_len / c_item) {
    snprintf(msg, sizeof msg, "gemm: c holds %lld floats, needs batch*m*n = %lld*%lld*%lld", (long long)c_len, (long long)batch,
             (long long)m, (long long)n);
    return fail_range(env, msg);
  }
  if (!check_items(env, "a", "aIndex", ai, batch, a_item, a_len)) return NULL;
  if (!check_items(env, "b", "bIndex", bi, batch, b_item, b_len)) return NULL;
  if (batch == 0 || c_item == 0) return NULL;

  if (k == 0) { /* an empty sum: the product is zero */
    memset(c, 0, (size_t)(batch * c_item) * sizeof(float));
    return NULL;
  }
  /* Row-major leading dimensions (at least 1, as BLAS requires). */
  const int64_t lda = ta ? m : k, ldb = tb ? k : n, ldc = n;
  for (int64_t i = 0; i < batch; i++) {
    const float *ap = a + (ai ? (int64_t)ai[i] : i) * a_item; /* (m, k) or (k, m) */
    const float *bp = b + (bi ? (int64_t)bi[i] : i) * b_item; /* (k, n) or (n, k) */
    float *cp = c + i * c_item;                               /* (m, n) */
    blas_gemm(ta, tb, m, n, k, ap, lda, bp, DT_F32, ldb, cp, ldc, 0);
  }
  return NULL;
}

static napi_value gemm_ex(napi_env env, napi_callback_info info) {
  size_t argc = 10;
  napi_value argv[10];
  CHECK_NAPI(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  static const char *fn = "gemmEx";
  if (argc < 9)
    return fail_type(env, "gemmEx(a, b, c, m, n, k, transA, transB, bDtype, accumulate?) needs at least 9 arguments");

  float *a, *c;
  void *b;
  int64_t a_len, b_len, c_len, m, n, k;
  int ta, tb, dt, acc = 0;
  if (!arg_f32(env, argv[0], fn, "a", &a, &a_len) || !arg_f32(env, argv[2], fn, "c", &c, &c_len) ||
      !arg_dim(env, argv[3], fn, "m", &m) || !arg_dim(env, argv[4], fn, "n", &n) || !arg_dim(env, argv[5], fn, "k", &k) ||
      !arg_flag(env, argv[6], fn, "transA", &ta) || !arg_flag(env, argv[7], fn, "transB", &tb))
    return NULL;
  napi_valuetype vt;
  char name[8] = {0};
  size_t name_len = 0;
  if (napi_typeof(env, argv[8], &vt) != napi_ok || vt != napi_string ||
      napi_get_value_string_utf8(env, argv[8], name, sizeof name, &name_len) != napi_ok)
    return fail_type(env, "gemmEx: bDtype must be a string: \"f32\", \"bf16\" or \"f16\"");
  if (strcmp(name, "f32") == 0)
    dt = DT_F32;
  else if (strcmp(name, "bf16") == 0)
    dt = DT_BF16;
  else if (strcmp(name, "f16") == 0)
    dt = DT_F16;
  else
    return fail_range(env, "gemmEx: bDtype must be \"f32\", \"bf16\" or \"f16\"");
  if (dt == DT_F32 ? !arg_f32(env, argv[1], fn, "b (bDtype \"f32\")", (float **)&b, &b_len)
                   : !arg_u16(env, argv[1], fn, dt == DT_BF16 ? "b (bDtype \"bf16\")" : "b (bDtype \"f16\")",
                              (uint16_t **)&b, &b_len))
    return NULL;
  if (argc > 9) {
    if (napi_typeof(env, argv[9], &vt) != napi_ok) return fail_type(env, "gemmEx: accumulate must be a boolean");
    if (vt != napi_undefined && !arg_flag(env, argv[9], fn, "accumulate", &acc)) return NULL;
  }

  char msg[200];
  if (a_len < m * k) { /* each product < 2^62: no overflow */
    snprintf(msg, sizeof msg, "gemmEx: a holds %lld floats, needs m*k = %lld*%lld", (long long)a_len, (long long)m,
             (long long)k);
    return fail_range(env, msg);
  }
  if (b_len < k * n) {
    snprintf(msg, sizeof msg, "gemmEx: b holds %lld elements, needs k*n = %lld*%lld", (long long)b_len, (long long)k,
             (long long)n);
    return fail_range(env, msg);
  }
  if (c_len < m * n) {
    snprintf(msg, sizeof msg, "gemmEx: c holds %lld floats, needs m*n = %lld*%lld", (long long)c_len, (long long)m,
             (long long)n);
    return fail_range(env, msg);
  }
  /* Row-major leading dimensions; blas_gemm does nothing for an empty C, and with k = 0 zeroes C
   * (or, accumulating, leaves it) without reading A or B. */
  const int64_t lda = ta ? m : k, ldb = tb ? k : n, ldc = n;
  blas_gemm(ta, tb, m, n, k, a, lda, b, dt, ldb, c, ldc, acc);
  return NULL;
}

static napi_value set_blas(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  CHECK_NAPI(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  char name[16] = {0};
  size_t len = 0;
  if (argc < 1 || napi_get_value_string_utf8(env, argv[0], name, sizeof name, &len) != napi_ok)
    return fail_type(env, "setBlas(name) needs a string: \"own\" or \"system\"");
  if (strcmp(name, "own") == 0) {
    blas_use_system(0);
    return NULL;
  }
  if (strcmp(name, "system") == 0) {
    if (blas_use_system(1)) return NULL;
    return fail_range(env, "setBlas: this build has no system BLAS (none was found when the addon was built)");
  }
  return fail_range(env, "setBlas: name must be \"own\" or \"system\"");
}

static napi_value set_gemm_kernel(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1], out;
  CHECK_NAPI(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  char name[16] = {0};
  size_t len = 0;
  if (argc < 1 || napi_get_value_string_utf8(env, argv[0], name, sizeof name, &len) != napi_ok)
    return fail_type(env, "setGemmKernel(name) needs a string: auto, amx, avx512bf16, avx512, avx2 or portable");
  CHECK_NAPI(env, napi_get_boolean(env, own_sgemm_force_kernel(name) != 0, &out));
  return out;
}

static napi_value set_threads(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  CHECK_NAPI(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  int64_t t = 0;
  if (argc < 1) return fail_type(env, "setThreads(threads) needs 1 argument");
  if (!arg_dim(env, argv[0], "setThreads", "threads", &t)) return NULL;
  if (t < 1 || t > 1024) return fail_range(env, "setThreads: threads must be in [1, 1024]");
  blas_set_threads((int)t);
  return NULL;
}

static napi_value set_fused_threads_js(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  CHECK_NAPI(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  int64_t t = 0;
  if (argc < 1) return fail_type(env, "setFusedThreads(threads) needs 1 argument");
  if (!arg_dim(env, argv[0], "setFusedThreads", "threads", &t)) return NULL;
  if (t < 1 || t > MAX_FUSED_THREADS) return fail_range(env, "setFusedThreads: threads must be in [1, 16]");
  set_fused_threads((int)t);
  return NULL;
}

static napi_value get_fused_threads_js(napi_env env, napi_callback_info info) {
  (void)info;
  napi_value out;
  CHECK_NAPI(env, napi_create_int32(env, fused_threads(), &out));
  return out;
}

static napi_value get_threads(napi_env env, napi_callback_info info) {
  (void)info;
  napi_value out;
  CHECK_NAPI(env, napi_create_int32(env, blas_threads(), &out));
  return out;
}

static napi_value get_info(napi_env env, napi_callback_info info) {
  (void)info;
  napi_value out, v;
  CHECK_NAPI(env, napi_create_object(env, &out));
  CHECK_NAPI(env, napi_create_string_utf8(env, blas_uses_system() ? "system" : "own", NAPI_AUTO_LENGTH, &v));
  CHECK_NAPI(env, napi_set_named_property(env, out, "blas", v));
  if (blas_has_system()) {
    char buf[240];
    blas_system_name(buf, sizeof buf);
    CHECK_NAPI(env, napi_create_string_utf8(env, buf, NAPI_AUTO_LENGTH, &v));
  } else
    CHECK_NAPI(env, napi_get_null(env, &v));
  CHECK_NAPI(env, napi_set_named_property(env, out, "system", v));
  CHECK_NAPI(env, napi_create_string_utf8(env, own_sgemm_kernel(), NAPI_AUTO_LENGTH, &v));
  CHECK_NAPI(env, napi_set_named_property(env, out, "kernel", v));
  CHECK_NAPI(env, napi_create_int32(env, blas_threads(), &v));
  CHECK_NAPI(env, napi_set_named_property(env, out, "threads", v));
  CHECK_NAPI(env, napi_create_int32(env, fused_threads(), &v));
  CHECK_NAPI(env, napi_set_named_property(env, out, "fusedThreads", v));
  return out;
}

NAPI_MODULE_INIT() {
  napi_property_descriptor props[] = {
      {"gemm", NULL, gemm, NULL, NULL, NULL, napi_enumerable, NULL},
      {"gemmEx", NULL, gemm_ex, NULL, NULL, NULL, napi_enumerable, NULL},
      {"setBlas", NULL, set_blas, NULL, NULL, NULL, napi_enumerable, NULL},
      {"setGemmKernel", NULL, set_gemm_kernel, NULL, NULL, NULL, napi_enumerable, NULL},
      {"setThreads", NULL, set_threads, NULL, NULL, NULL, napi_enumerable, NULL},
      {"getThreads", NULL, get_threads, NULL, NULL, NULL, napi_enumerable, NULL},
      {"info", NULL, get_info, NULL, NULL, NULL, napi_enumerable, NULL},
      {"setFusedThreads", NULL, set_fused_threads_js, NULL, NULL, NULL, napi_enumerable, NULL},
      {"getFusedThreads", NULL, get_fused_threads_js, NULL, NULL, NULL, napi_enumerable, NULL},
  };
  if (napi_define_properties(env, exports, sizeof props / sizeof props[0], props) != napi_ok) return NULL;
  if (!register_kernel_bindings(env, exports)) return NULL;
  if (!register_model_ops(env, exports)) return NULL;
  return exports;
}
