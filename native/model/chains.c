/*
 * Shared prefixes in one pass (model.h): a sequence may continue an earlier sequence of the same
 * pass, its parent, so that several sequences with a common beginning compute it once. A chain is
 * a sequence and its ancestors; its positions run on from the ancestors' total length.
 */
#include "model.h"

void chain_pasts(int64_t nseq, const int64_t *n, const int32_t *parent, int64_t *past) {
  for (int64_t s = 0; s < nseq; s++) past[s] = parent[s] < 0 ? 0 : past[parent[s]] + n[parent[s]];
}

void pass_set_parents(pass_t *p, const int32_t *parent) {
  for (int64_t s = 0; s < p->nseq; s++) p->seqs[s].parent = parent[s] < 0 ? -1 : parent[s];
}
