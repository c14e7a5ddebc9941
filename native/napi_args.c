/* Argument checking for the addon's N-API functions; see napi_args.h. */
#include "napi_args.h"

#include <math.h>
#include <stdio.h>

napi_value fail_type(napi_env env, const char *msg) {
  napi_throw_type_error(env, NULL, msg);
  return NULL;
}

napi_value fail_range(napi_env env, const char *msg) {
  napi_throw_range_error(env, NULL, msg);
  return NULL;
}

static int is_nullish(napi_env env, napi_value v, int *out) {
  napi_valuetype vt;
  if (napi_typeof(env, v, &vt) != napi_ok) return 0;
  *out = vt == napi_undefined || vt == napi_null;
  return 1;
}

static int typed_array(napi_env env, napi_value v, napi_typedarray_type want, void **data, int64_t *len) {
  bool is_ta = false;
  napi_typedarray_type type;
  size_t length = 0;
  void *ptr = NULL;
  if (napi_is_typedarray(env, v, &is_ta) != napi_ok || !is_ta) return 0;
  if (napi_get_typedarray_info(env, v, &type, &length, &ptr, NULL, NULL) != napi_ok || type != want) return 0;
  *data = ptr;
  *len = (int64_t)length;
  return 1;
}

/* v as a typed array of type `want` (or, when `nullable`, null/undefined: data NULL, len 0);
 * otherwise a TypeError "fn: name must be <what>". */
static int arg_typed(napi_env env, napi_value v, const char *fn, const char *name, napi_typedarray_type want,
                     int nullable, const char *what, void **data, int64_t *len) {
  *data = NULL;
  *len = 0;
  if (nullable) {
    int nullish = 0;
    if (!is_nullish(env, v, &nullish)) return 0;
    if (nullish) return 1;
  }
  if (typed_array(env, v, want, data, len)) return 1;
  char msg[200];
  snprintf(msg, sizeof msg, "%s: %s must be %s%s", fn, name, what, nullable ? " or null" : "");
  napi_throw_type_error(env, NULL, msg);
  return 0;
}

int arg_f32(napi_env env, napi_value v, const char *fn, const char *name, float **data, int64_t *len) {
  return arg_typed(env, v, fn, name, napi_float32_array, 0, "a Float32Array", (void **)data, len);
}

int arg_f32_or_null(napi_env env, napi_value v, const char *fn, const char *name, float **data, int64_t *len) {
  return arg_typed(env, v, fn, name, napi_float32_array, 1, "a Float32Array", (void **)data, len);
}

int arg_u16(napi_env env, napi_value v, const char *fn, const char *name, uint16_t **data, int64_t *len) {
  return arg_typed(env, v, fn, name, napi_uint16_array, 0, "a Uint16Array", (void **)data, len);
}

int arg_f64(napi_env env, napi_value v, const char *fn, const char *name, double **data, int64_t *len) {
  return arg_typed(env, v, fn, name, napi_float64_array, 0, "a Float64Array", (void **)data, len);
}

int arg_i32_or_null(napi_env env, napi_value v, const char *fn, const char *name, int32_t **data, int64_t *len) {
  return arg_typed(env, v, fn, name, napi_int32_array, 1, "an Int32Array", (void **)data, len);
}

/* v as a double, or a TypeError "fn: name must be a number". */
static int read_number(napi_env env, napi_value v, const char *fn, const char *name, double *out) {
  napi_valuetype vt;
  if (napi_typeof(env, v, &vt) == napi_ok && vt == napi_number && napi_get_value_double(env, v, out) == napi_ok) return 1;
  char msg[200];
  snprintf(msg, sizeof msg, "%s: %s must be a number", fn, name);
  napi_throw_type_error(env, NULL, msg);
  return 0;
}

int arg_dim(napi_env env, napi_value v, const char *fn, const char *name, int64_t *out) {
  char msg[200];
  double d = 0;
  if (!read_number(env, v, fn, name, &d)) return 0;
  if (!(d >= 0) || d > (double)MAX_DIM || d != (double)(int64_t)d) {
    snprintf(msg, sizeof msg, "%s: %s must be a non-negative integer below 2^31, got %g", fn, name, d);
    napi_throw_range_error(env, NULL, msg);
    return 0;
  }
  *out = (int64_t)d;
  return 1;
}

int arg_number(napi_env env, napi_value v, const char *fn, const char *name, double *out) {
  char msg[200];
  double d = 0;
  if (!read_number(env, v, fn, name, &d)) return 0;
  if (!isfinite(d)) {
    snprintf(msg, sizeof msg, "%s: %s must be finite, got %g", fn, name, d);
    napi_throw_range_error(env, NULL, msg);
    return 0;
  }
  *out = d;
  return 1;
}

int arg_flag(napi_env env, napi_value v, const char *fn, const char *name, int *out) {
  napi_valuetype vt;
  char msg[200];
  bool b = false;
  if (napi_typeof(env, v, &vt) != napi_ok || vt != napi_boolean || napi_get_value_bool(env, v, &b) != napi_ok) {
    snprintf(msg, sizeof msg, "%s: %s must be a boolean", fn, name);
    napi_throw_type_error(env, NULL, msg);
    return 0;
  }
  *out = b ? 1 : 0;
  return 1;
}

int expect_len(napi_env env, const char *fn, const char *name, int64_t len, int64_t want, const char *what) {
  if (len == want) return 1;
  char msg[240];
  snprintf(msg, sizeof msg, "%s: %s holds %lld floats, expected %s = %lld", fn, name, (long long)len, what, (long long)want);
  napi_throw_range_error(env, NULL, msg);
  return 0;
}

/* One tag per handle kind (random 128-bit values, fixed for the addon's lifetime). */
static const napi_type_tag HANDLE_TAGS[HANDLE_KINDS] = {
    {0x6d3f2a9c81e04b57ULL, 0xa1c4e07d93b26f18ULL}, /* model */
    {0x2b7e95d04f1c8a63ULL, 0xd85a1f3c6e09b742ULL}, /* pass */
};
static const char *HANDLE_NAMES[HANDLE_KINDS] = {"a model handle", "a pass handle"};

int tag_handle(napi_env env, napi_value v, const char *fn, handle_kind kind) {
  if (napi_type_tag_object(env, v, &HANDLE_TAGS[kind]) == napi_ok) return 1;
  char msg[160];
  snprintf(msg, sizeof msg, "%s: could not mark the new handle (napi_type_tag_object failed)", fn);
  napi_throw_error(env, NULL, msg);
  return 0;
}

/* The kind of handle v is, or -1 when it is no handle of this addon. */
static int handle_kind_of(napi_env env, napi_value v) {
  for (int k = 0; k < HANDLE_KINDS; k++) {
    bool is = false;
    if (napi_check_object_type_tag(env, v, &HANDLE_TAGS[k], &is) == napi_ok && is) return k;
  }
  return -1;
}

/* What v is, in a few words, for an error message. */
static const char *value_words(napi_env env, napi_value v) {
  napi_valuetype t;
  if (napi_typeof(env, v, &t) != napi_ok) return "a value of unknown type";
  switch (t) {
  case napi_undefined: return "undefined";
  case napi_null: return "null";
  case napi_boolean: return "a boolean";
  case napi_number: return "a number";
  case napi_string: return "a string";
  case napi_symbol: return "a symbol";
  case napi_function: return "a function";
  case napi_bigint: return "a bigint";
  case napi_object: return "an object";
  case napi_external: {
    const int k = handle_kind_of(env, v);
    return k >= 0 ? HANDLE_NAMES[k] : "an external that is not a handle of this addon";
  }
  }
  return "a value of unknown type";
}

void *arg_handle(napi_env env, napi_value v, const char *fn, int index, handle_kind kind) {
  napi_valuetype t;
  void *data = NULL;
  bool is = false;
  if (napi_typeof(env, v, &t) == napi_ok && t == napi_external &&
      napi_check_object_type_tag(env, v, &HANDLE_TAGS[kind], &is) == napi_ok && is &&
      napi_get_value_external(env, v, &data) == napi_ok && data)
    return data;
  char msg[200];
  snprintf(msg, sizeof msg, "%s: argument %d must be %s, got %s", fn, index, HANDLE_NAMES[kind], value_words(env, v));
  napi_throw_type_error(env, NULL, msg);
  return NULL;
}
