/*
 * What the native engine's N-API files share (model_napi.c: passes; model_create.c: building a
 * model from JavaScript arrays): the model's N-API box and two argument helpers.
 */
#ifndef AGENT_R1_MODEL_JS_H
#define AGENT_R1_MODEL_JS_H

#include <node_api.h>
#include <stdbool.h>

#include "model.h"

/* A model as JavaScript holds it: the model and references to the arrays it points into. */
typedef struct {
  model_t m;
  napi_ref *refs; /* the arrays the model points into */
  size_t nrefs;
} model_box;

/* A typed array argument with its element type. */
static inline int typed(napi_env env, napi_value v, napi_typedarray_type *type, void **data, int64_t *len) {
  bool is = false;
  if (napi_is_typedarray(env, v, &is) != napi_ok || !is) return 0;
  size_t n = 0;
  napi_value ab;
  size_t off;
  if (napi_get_typedarray_info(env, v, type, &n, data, &ab, &off) != napi_ok) return 0;
  *len = (int64_t)n;
  return 1;
}

/* null or undefined. */
static inline int is_null(napi_env env, napi_value v) {
  napi_valuetype t;
  return napi_typeof(env, v, &t) == napi_ok && (t == napi_null || t == napi_undefined);
}

/* Element i of an Array. */
static inline int element(napi_env env, napi_value arr, uint32_t i, napi_value *out) {
  return napi_get_element(env, arr, i, out) == napi_ok;
}

/* modelCreate(dims, invFreq, tensors, dtypes, grads, lora, loraRank, loraScale): see model_napi.c. */
napi_value model_create(napi_env env, napi_callback_info info);

#endif
