/**
 * Packing sequences into micro-batches by a token budget: consecutive indices,
 * each micro-batch padded to its longest member costs (members x longest)
 * tokens and stays within the budget; a sequence longer than the budget goes
 * alone. Long multi-turn trajectories thus never blow the wasm heap.
 */
export function packMicroBatches(lengths: number[], tokenBudget: number): number[][] {
  const batches: number[][] = [];
  let cur: number[] = [];
  let longest = 0;
  for (let i = 0; i < lengths.length; i++) {
    const l = lengths[i];
    const nextLongest = Math.max(longest, l);
    if (cur.length > 0 && nextLongest * (cur.length + 1) > tokenBudget) {
      batches.push(cur);
      cur = [];
      longest = 0;
    }
    cur.push(i);
    longest = Math.max(longest, l);
  }
  if (cur.length) batches.push(cur);
  return batches;
}

/** A default budget from the vocabulary size: the (tokens x vocab) logits and their gradients dominate. */
export function defaultTokenBudget(vocabSize: number, hiddenSize: number): number {
  const byLogits = Math.floor(48e6 / vocabSize);
  const byActivations = Math.floor(64e6 / (hiddenSize * 24));
  return Math.max(32, Math.min(4096, byLogits, byActivations));
}
