/* The scratch-block pool (scratch.h). */
#define _POSIX_C_SOURCE 200112L
#include "scratch.h"

#include <stdlib.h>

#define SCRATCH_SLOTS 4
/* Blocks below this size come from malloc's own free lists cheaply enough. */
#define SCRATCH_MIN ((size_t)1 << 20)

typedef struct {
  void *block;
  size_t bytes;
} slot_t;

/* Kept blocks; a handed-out block's size is stored in the 64 bytes before it. */
static __thread slot_t kept[SCRATCH_SLOTS];

void *scratch_get(size_t bytes) {
  int best = -1;
  for (int i = 0; i < SCRATCH_SLOTS; i++) /* the smallest kept block that is large enough */
    if (kept[i].block && kept[i].bytes >= bytes && (best < 0 || kept[i].bytes < kept[best].bytes)) best = i;
  if (best >= 0) {
    void *b = kept[best].block;
    kept[best].block = NULL;
    return b;
  }
  void *raw = NULL;
  if (posix_memalign(&raw, 64, bytes + 64) != 0) return NULL;
  *(size_t *)raw = bytes;
  return (char *)raw + 64;
}

void scratch_put(void *block) {
  if (!block) return;
  void *raw = (char *)block - 64;
  const size_t bytes = *(size_t *)raw;
  if (bytes >= SCRATCH_MIN) {
    int to = -1;
    for (int i = 0; i < SCRATCH_SLOTS && to < 0; i++)
      if (!kept[i].block) to = i;
    if (to < 0) /* all slots full: replace the smallest kept block if this one is larger */
      for (int i = 0; i < SCRATCH_SLOTS; i++)
        if (kept[i].bytes < bytes && (to < 0 || kept[i].bytes < kept[to].bytes)) to = i;
    if (to >= 0) {
      if (kept[to].block) free((char *)kept[to].block - 64);
      kept[to].block = block;
      kept[to].bytes = bytes;
      return;
    }
  }
  free(raw);
}
