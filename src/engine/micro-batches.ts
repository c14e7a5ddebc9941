/**
 * Packing sequences into micro-batches under a memory budget, as the TF.js engine packs them
 * (the C engine packs by tokens, with no padding: ./local/native/native-train.ts; both behind
 * MicroBatchPlanner). Consecutive indices go together; a micro-batch is right-padded to its longest
 * member, so it costs members x cost(longest). A sequence over budget goes alone. Long multi-turn
 * trajectories thus never blow the TF.js engine's wasm heap (4 GiB, fatal when hit).
 */
export function packMicroBatches(
  lengths: number[],
  budget: number,
  costPerSequence: (len: number) => number = (l) => l,
): number[][] {
  const batches: number[][] = [];
  let cur: number[] = [];
  let longest = 0;
  for (let i = 0; i < lengths.length; i++) {
    const nextLongest = Math.max(longest, lengths[i]);
    if (cur.length > 0 && costPerSequence(nextLongest) * (cur.length + 1) > budget) {
      batches.push(cur);
      cur = [];
    }
    if (cur.length === 0) longest = 0;
    cur.push(i);
    longest = Math.max(longest, lengths[i]);
  }
  if (cur.length) batches.push(cur);
  return batches;
}

export interface ActivationShape {
  vocabSize: number;
  hiddenSize: number;
  intermediateSize: number;
  numLayers: number;
  numHeads: number;
}

/**
 * Bytes the gradient tape holds for one sequence of `len` tokens: per layer
 * about 24 hidden-sized and 6 ffn-sized float32 vectors per token, plus the
 * attention scores and probabilities (heads x len per token, a few copies),
 * plus the logits and their log-softmax (vocab per token, a few copies).
 * An estimate, not a measurement of the heap; it errs high. For orientation,
 * M (hidden 512, 8 layers, vocab 2048): 251 MB per 256-token sequence by this
 * formula; one thread training 4 x 256-token micro-batches peaked at 3.8 GB RSS.
 */
export function activationBytes(s: ActivationShape, len: number): number {
  const perLayer = 24 * s.hiddenSize + 6 * s.intermediateSize + 4 * s.numHeads * len;
  return 4 * len * (s.numLayers * perLayer + 4 * s.vocabSize);
}

/** Default tape budget per micro-batch. */
export const DEFAULT_ACTIVATION_BUDGET = 640 * 2 ** 20;

/** Splits a list of sequence lengths into micro-batches (lists of indices). */
export type MicroBatchPlanner = (lengths: number[]) => number[][];

/** A planner from a token budget (padded tokens per micro-batch) or a ready planner. */
export function toPlanner(p: number | MicroBatchPlanner): MicroBatchPlanner {
  return typeof p === "number" ? (lengths) => packMicroBatches(lengths, p) : p;
}

/** The engine's planner: the activation-memory budget, and optionally a cap on padded tokens. */
export function memoryPlanner(
  shape: ActivationShape,
  maxBytes = DEFAULT_ACTIVATION_BUDGET,
  maxTokens = Infinity,
): MicroBatchPlanner {
  return (lengths) =>
    packMicroBatches(lengths, 1, (len) => Math.max(activationBytes(shape, len) / maxBytes, len / maxTokens));
}
