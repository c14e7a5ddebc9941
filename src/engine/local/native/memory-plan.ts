/**
 * The memory plan of the C engine: what a model needs before it is loaded or trained, from
 * config.json alone, checked against a budget (engine.memoryGb, else a share of physical memory)
 * so that a model too large for the machine is one line of error instead of a crash (the kernel's
 * OOM killer).
 *
 *   weights      the parameters as held: matrices in their dtype (float32 once they train),
 *                norms and biases in float32
 *   training     what the trained tensors add: a float32 gradient and two AdamW moments each,
 *                plus (LoRA) the adapters themselves; a critic adds a full copy trained in full,
 *                or (LoRA run) only its adapters and value head
 *   activations  one training micro-batch (engine.microBatchMb)
 *   kv           the prefix cache (engine.prefixCacheMb) and one sequence of the longest context
 *                (engine.maxContextTokens, else max_position_embeddings)
 *
 * Arithmetic only; the backend (./native-backend.ts) decides when to check: at load, and before
 * the full weights (or a critic) first train. The TF.js engine's limit is its wasm heap instead
 * (../tfjs/heap-plan.ts).
 */
import { totalmem } from "node:os";
import { parameterShapes } from "../../../model/parameter-shapes.js";
import type { ModelConfig } from "../../../model/config.js";
import { InputError } from "../../../util/errors.js";

/** The default budget of the native engine: this share of physical memory. */
export const DEFAULT_MEMORY_SHARE = 0.75;

export interface MemoryNeeds {
  config: ModelConfig;
  /** Bytes per element of the weight matrices as loaded: 2 (bfloat16, float16) or 4. */
  matrixBytes: number;
  /** What trains: every weight, LoRA adapters of `loraFloats` floats, or nothing (sampling only). */
  train: "full" | "lora" | "none";
  loraFloats?: number;
  /** Bytes of one training micro-batch's activations (counted when something trains). */
  activationBytes: number;
  prefixCacheBytes: number;
  /** Bytes of keys and values of one sequence at the longest context. */
  contextBytes: number;
  /**
   * A value model (the critic) beside the policy: "full", a second copy of the weights trained in
   * full; "lora", its own adapters (`criticLoraFloats` floats) and value head over the policy's
   * frozen base, which it shares.
   */
  critic?: "full" | "lora";
  criticLoraFloats?: number;
}

export interface MemoryPlan {
  weights: number;
  training: number;
  activations: number;
  kv: number;
  total: number;
}

/** Bytes by part, from the shapes config.json implies. */
export function planMemory(n: MemoryNeeds): MemoryPlan {
  let matrices = 0,
    vectors = 0;
  for (const [, shape] of parameterShapes(n.config, "lm")) {
    const size = shape.reduce((a, b) => a * b, 1);
    if (shape.length === 2) matrices += size;
    else vectors += size;
  }
  const params = matrices + vectors;
  const full = n.train === "full";
  let weights = matrices * (full ? 4 : n.matrixBytes) + vectors * 4;
  // gradient + two moments per trained float; LoRA adapters also hold their values
  let training = full ? params * 12 : n.train === "lora" ? (n.loraFloats ?? 0) * 16 : 0;
  if (n.critic === "full") {
    weights += params * 4;
    training += params * 12;
  } else if (n.critic === "lora") training += ((n.criticLoraFloats ?? 0) + n.config.hiddenSize) * 16;
  const activations = n.train === "none" && !n.critic ? 0 : n.activationBytes;
  const kv = n.prefixCacheBytes + n.contextBytes;
  return { weights, training, activations, kv, total: weights + training + activations + kv };
}

/** The native engine's budget: engine.memoryGb, else a share of physical memory. */
export function memoryBudget(memoryGb: number | undefined): { bytes: number; source: string } {
  if (memoryGb !== undefined) return { bytes: memoryGb * 2 ** 30, source: "engine.memoryGb" };
  return {
    bytes: Math.floor(totalmem() * DEFAULT_MEMORY_SHARE),
    source: `${Math.round(DEFAULT_MEMORY_SHARE * 100)}% of this machine's ${gib(totalmem())}; engine.memoryGb sets it`,
  };
}

/** One line: the total, its parts, the budget, and what to change. Throws InputError when over. */
export function checkMemoryPlan(
  plan: MemoryPlan,
  budget: { bytes: number; source: string },
  o: { model: string; doing: string; hint: string },
): void {
  if (plan.total <= budget.bytes) return;
  const parts = [
    `weights ${gib(plan.weights)}`,
    plan.training ? `gradients and optimizer state ${gib(plan.training)}` : "",
    plan.activations ? `a micro-batch's activations ${gib(plan.activations)}` : "",
    `KV cache ${gib(plan.kv)}`,
  ].filter(Boolean);
  throw new InputError(
    `${o.model}: ${o.doing} needs ${gib(plan.total)} (${parts.join(", ")}), over the budget of ${gib(budget.bytes)} (${budget.source}); ${o.hint}`,
  );
}

export function gib(bytes: number): string {
  return bytes >= 2 ** 30 ? `${(bytes / 2 ** 30).toFixed(1)} GiB` : `${Math.max(1, Math.round(bytes / 2 ** 20))} MiB`;
}
