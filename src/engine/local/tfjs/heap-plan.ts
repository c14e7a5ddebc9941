/**
 * Whether a training call fits one replica's TF.js wasm heap (4 GiB, src/model/model-limits.ts),
 * decided before any tensor work: running out of heap mid-pass aborts the wasm instance
 * ("RuntimeError: Aborted()"), and the models in that thread are unusable after it. Sampling and
 * scoring hold no gradients, Adam moments or tape, so a model can sample yet not train.
 *
 * The estimate, erring high:
 *   heap ≈ weightFactor · (float32 weights of every model the replica trains)
 *        + activationFactor · activationBytes(largest micro-batch) + the prefix-cache budget
 * must stay under the heap less HEAP_HEADROOM. The factors are measured, not derived: the peak
 * heap (the wasm memory's size, which only grows) over forwardBackward twice, optimStep, and again,
 * on models of 3.5M to 144M parameters, vocabularies of 2,048 to 32,768 and micro-batches of
 * 1 x 16 to 4 x 256 tokens, which the estimate exceeds by 4 to 36 % (the 144M model ran out of
 * heap, as the estimate says). The factors (HEAP_FACTORS): weights 10.5x = weights, accumulated
 * gradients, a micro-batch's fresh gradients, Adam's two moments, weight-sized temporaries of the
 * backward pass, the transposed weights it caches and XNNPACK's packed copies of both;
 * activations 2.75x.
 * (src/engine/micro-batches.ts `activationBytes` counts the tape's main tensors only, hence the
 * factors.)
 */
import { InputError } from "../../../util/errors.js";
import { MAX_WEIGHT_BYTES } from "../../../model/model-limits.js";
import { activationBytes, type ActivationShape, type MicroBatchPlanner } from "../../micro-batches.js";

export const HEAP_BYTES = MAX_WEIGHT_BYTES;
/** Kept free: the wasm module's own data and stack, and allocator slack. */
export const HEAP_HEADROOM = 256 * 2 ** 20;

/** Heap bytes per weight byte and per activation byte the tape counts (measured, see above). */
export const HEAP_FACTORS = { weights: 10.5, activations: 2.75 };

/** The largest micro-batch of a call, by estimated activation bytes. */
export interface MicroBatchSize {
  sequences: number;
  /** Padded length: the longest member's tokens. */
  tokens: number;
  activationBytes: number;
}

export interface HeapPlanInput {
  /** Parameters of each model the replica trains: the policy, and the critic once created. */
  parameters: number[];
  /** Bytes the prefix cache may hold. */
  prefixCacheBytes: number;
  /** The call's largest micro-batch; none for optimStep. */
  microBatch?: MicroBatchSize;
}

/** The micro-batch of `lengths` (as `plan` packs them) whose tape is the largest. */
export function largestMicroBatch(
  shape: ActivationShape,
  plan: MicroBatchPlanner,
  lengths: number[],
): MicroBatchSize | undefined {
  let best: MicroBatchSize | undefined;
  for (const idx of plan(lengths)) {
    const tokens = Math.max(...idx.map((i) => lengths[i]));
    const bytes = idx.length * activationBytes(shape, tokens);
    if (!best || bytes > best.activationBytes) best = { sequences: idx.length, tokens, activationBytes: bytes };
  }
  return best;
}

/** The estimate's three parts, in bytes. */
export function trainingHeapBytes(p: HeapPlanInput): {
  weights: number;
  activations: number;
  prefixCache: number;
  total: number;
} {
  const f = HEAP_FACTORS;
  const weights = f.weights * 4 * p.parameters.reduce((a, b) => a + b, 0);
  const activations = f.activations * (p.microBatch?.activationBytes ?? 0);
  return { weights, activations, prefixCache: p.prefixCacheBytes, total: weights + activations + p.prefixCacheBytes };
}

const gib = (n: number) => `${(n / 2 ** 30).toFixed(2)} GiB`;

/** Throws a one-line InputError when training would not fit, naming the size needed and what to change. */
export function checkTrainingHeap(p: HeapPlanInput): void {
  const need = trainingHeapBytes(p);
  const room = HEAP_BYTES - HEAP_HEADROOM;
  if (need.total <= room) return;
  const f = HEAP_FACTORS;
  const params = p.parameters.reduce((a, b) => a + b, 0);
  const mb = p.microBatch;
  const parts = [
    `weights ${gib(4 * params)} x${f.weights} for gradients, Adam moments and working copies`,
    ...(mb ? [`activations ${gib(need.activations)} for ${mb.sequences} x ${mb.tokens} tokens`] : []),
    ...(p.prefixCacheBytes > 0 ? [`prefix cache ${gib(p.prefixCacheBytes)}`] : []),
  ];
  const message = `training needs ~${gib(need.total)} of wasm heap (${parts.join(" + ")}); the TF.js engine holds ${gib(HEAP_BYTES)} per replica`;
  throw new InputError(message, fix(p, need, room));
}

function fix(p: HeapPlanInput, need: ReturnType<typeof trainingHeapBytes>, room: number): string {
  const params = p.parameters.reduce((a, b) => a + b, 0);
  const native =
    "; or train on the native engine (engine.backend: native), which holds the model outside the wasm heap and can train LoRA adapters (engine.lora)";
  if (need.weights + need.prefixCache > room) {
    const most = (room - need.prefixCache) / (HEAP_FACTORS.weights * 4);
    const size = `${Math.floor(most / 1e6)}M parameters at most, this one has ${Math.round(params / 1e6)}M`;
    return `train a smaller model (${size}; sampling and scoring this one still work)${native}`;
  }
  const mb = p.microBatch!;
  // Sequences of a micro-batch are padded to one length, so each costs the same.
  const alone = trainingHeapBytes({
    ...p,
    microBatch: { ...mb, sequences: 1, activationBytes: mb.activationBytes / mb.sequences },
  }).total;
  if (mb.sequences > 1 && alone <= room)
    return `lower engine.microBatchMb, so that a micro-batch holds fewer than ${mb.sequences} sequences of ${mb.tokens} tokens${native}`;
  if (need.total - need.prefixCache <= room)
    return `lower engine.prefixCacheMb (now ${Math.round(p.prefixCacheBytes / 2 ** 20)})${native}`;
  return `shorten the sequences (rollout.maxTotalTokens): this one has ${mb.tokens} tokens${native}`;
}
