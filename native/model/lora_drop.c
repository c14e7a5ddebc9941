/* LoRA dropout masks (lora_drop.h): hashes, not stored. */
#include "lora_drop.h"

#include <math.h>

#include "../parallel.h"
#include "../vec_math.h"

/* splitmix64's finalizer: a well-mixed 64-bit hash of x. */
static inline uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t lora_drop_seed(uint64_t pass_seed, uint64_t index) { return mix64(mix64(pass_seed) ^ mix64(~index)); }

typedef struct {
  const lora_drop *d;
  const float *src; /* (N, in) */
  float *dst;       /* (N, in): src ⊙ keep / (1 - p), or, with add, dst += that */
  int64_t in;
  int add;
} drop_ctx;

static void drop_rows(void *p, int64_t lo, int64_t hi, int chunk) {
  (void)chunk;
  const drop_ctx *c = (const drop_ctx *)p;
  const uint64_t cut = (uint64_t)((double)c->d->p * 4294967296.0); /* drop when the hash's top 32 bits are below */
  const float inv = 1.0f / (1.0f - c->d->p);
  for (int64_t i = lo; i < hi; i++) {
    const uint64_t row = mix64(c->d->seed ^ (uint64_t)(c->d->row0 + i));
    const float *s = c->src + i * c->in;
    float *o = c->dst + i * c->in;
    for (int64_t j = 0; j < c->in; j++) {
      const float v = (mix64(row + (uint64_t)j) >> 32) < cut ? 0.0f : s[j] * inv;
      o[j] = c->add ? o[j] + v : v;
    }
  }
}

void lora_drop_apply(const lora_drop *d, const float *src, float *dst, int64_t N, int64_t in, int add) {
  drop_ctx c = {d, src, dst, in, add};
  parallel_for(N, GRAIN_FLOATS / in + 1, drop_rows, &c);
}
