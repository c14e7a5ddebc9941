/*
 * Argument checking shared by the addon's N-API functions. Every helper takes
 * the calling function's name (`fn`) and the argument's name, throws a
 * JavaScript TypeError / RangeError that names both ("fn: name must be ..."),
 * and returns 0 on failure (the caller then returns NULL to JavaScript).
 */
#ifndef AGENT_R1_NAPI_ARGS_H
#define AGENT_R1_NAPI_ARGS_H

#define NAPI_VERSION 8
#include <node_api.h>
#include <stdint.h>

#define MAX_DIM 2147483647LL

/* Throws an Error and returns NULL from the caller when an N-API call fails. */
#define CHECK_NAPI(env, call)                                                      \
  do {                                                                             \
    if ((call) != napi_ok) {                                                       \
      napi_throw_error((env), NULL, "agent-r1 native: N-API call failed: " #call); \
      return NULL;                                                                 \
    }                                                                              \
  } while (0)

napi_value fail_type(napi_env env, const char *msg);
napi_value fail_range(napi_env env, const char *msg);

/* A Float32Array argument: its data pointer and length in floats. */
int arg_f32(napi_env env, napi_value v, const char *fn, const char *name, float **data, int64_t *len);
/* A Float32Array, or null / undefined (returns 1 with *data = NULL, *len = 0). */
int arg_f32_or_null(napi_env env, napi_value v, const char *fn, const char *name, float **data, int64_t *len);
/* A Uint16Array argument (e.g. bfloat16 / float16 bit patterns): its data pointer and length in elements. */
int arg_u16(napi_env env, napi_value v, const char *fn, const char *name, uint16_t **data, int64_t *len);
/* A Float64Array argument: its data pointer and length in doubles. */
int arg_f64(napi_env env, napi_value v, const char *fn, const char *name, double **data, int64_t *len);
/* An Int32Array, or null / undefined (returns 1 with *data = NULL, *len = 0). */
int arg_i32_or_null(napi_env env, napi_value v, const char *fn, const char *name, int32_t **data, int64_t *len);
/* A non-negative integer below 2^31. */
int arg_dim(napi_env env, napi_value v, const char *fn, const char *name, int64_t *out);
/* A finite number. */
int arg_number(napi_env env, napi_value v, const char *fn, const char *name, double *out);
/* A boolean. */
int arg_flag(napi_env env, napi_value v, const char *fn, const char *name, int *out);
/* Checks that array `name` holds exactly `want` floats; `what` describes want ("rows*cols = 4*8"). */
int expect_len(napi_env env, const char *fn, const char *name, int64_t len, int64_t want, const char *what);

/*
 * The handles the addon gives JavaScript: N-API externals, each type-tagged with its kind when it
 * is made (napi_type_tag_object), so a handle of another kind, another addon's external or any
 * other value is refused before its pointer is read.
 */
typedef enum { HANDLE_MODEL, HANDLE_PASS, HANDLE_KINDS } handle_kind;
/* Marks a new external as a handle of `kind`; 0 (an Error thrown) when N-API refuses. */
int tag_handle(napi_env env, napi_value v, const char *fn, handle_kind kind);
/* The data of handle v, argument `index` (from 1) of fn; else NULL after a TypeError such as
 * "passFree: argument 1 must be a pass handle, got a model handle". */
void *arg_handle(napi_env env, napi_value v, const char *fn, int index, handle_kind kind);

#endif
