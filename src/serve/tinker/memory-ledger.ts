/**
 * The memory plan of `serve --tinker` across everything it holds, against one budget (the native
 * engine's: --memory-gb, else a share of physical memory; ../../engine/local/native/memory-plan.ts):
 *
 *   a base model     once, however many models train over it: its weights as stored, and the KV
 *                    cache of its own sampling (sessions on the base model)
 *   a LoRA model     its adapters, their gradients and AdamW's two moments (16 bytes a float), and
 *                    the KV cache of its sampling (a prefix cache and one sequence of the longest
 *                    context)
 *   a full model     a float32 copy of the weights, their gradients and moments, and its KV cache
 *   a sampler        a checkpoint loaded to sample: its adapters over a base held here, or its
 *                    own weights as stored; and its KV cache
 *   activations      one training micro-batch, counted once while anything trains: every pass runs
 *                    on the server's thread from start to end, one at a time
 *
 * A model or sampler that would pass the budget is refused before anything loads: a 429 whose
 * one line names what was asked, what it needs, what the server holds, and the budget.
 */
import { totalmem } from "node:os";
import type { ModelConfig } from "../../model/config.js";
import type { LoraSpec } from "../../model/peft-targets.js";
import type { LocalEngineOptions } from "../../engine/local/local-engine.js";
import { DEFAULT_NATIVE_ACTIVATION_BUDGET, memoryNeeds } from "../../engine/local/native/native-backend.js";
import { DEFAULT_MEMORY_SHARE, gib, memoryBudget, planMemory } from "../../engine/local/native/memory-plan.js";
import { TinkerError } from "../../engine/remote/tinker-error.js";

/** What one thing the server holds takes, by part, under a key of its own. */
export interface Charge {
  key: string;
  kind: "base" | "model" | "sampler";
  /** Its name in the refusal: the base model's name (the others are counted). */
  name: string;
  weights: number;
  /** Trained tensors: (LoRA) the adapters, and their gradients and AdamW moments. */
  training: number;
  kv: number;
  /** It trains (the activations are counted while anything does). */
  trains: boolean;
}

export const bytesOf = (c: Charge): number => c.weights + c.training + c.kv;

/** A base model shared by the models over it: weights as stored, and its own sampling's KV cache. */
export function baseCharge(name: string, config: ModelConfig, opts: LocalEngineOptions): Charge {
  const p = planMemory(memoryNeeds(config, "none", opts));
  return { key: `base:${name}`, kind: "base", name, weights: p.weights, training: 0, kv: p.kv, trains: false };
}

/** A training model: LoRA adapters over a shared base, or full weights of its own. */
export function modelCharge(
  id: string,
  config: ModelConfig,
  spec: LoraSpec | undefined,
  opts: LocalEngineOptions,
): Charge {
  const p = planMemory(memoryNeeds(config, spec ? "lora" : "full", opts, spec));
  const weights = spec ? 0 : p.weights;
  return { key: `model:${id}`, kind: "model", name: id, weights, training: p.training, kv: p.kv, trains: true };
}

/** A checkpoint loaded to sample: its adapters over a base held here (`spec`), else its own weights. */
export function samplerCharge(
  dir: string,
  config: ModelConfig,
  spec: LoraSpec | undefined,
  opts: LocalEngineOptions,
): Charge {
  const p = planMemory(memoryNeeds(config, spec ? "lora" : "none", opts, spec));
  // adapters: their values alone (a quarter of what training them holds); else the weights as stored
  const weights = spec ? p.training / 4 : p.weights;
  return { key: `sampler:${dir}`, kind: "sampler", name: dir, weights, training: 0, kv: p.kv, trains: false };
}

const count = (n: number, what: string) => `${n} ${what}${n === 1 ? "" : "s"}`;

/** "the base 'tiny', 2 models and 1 sampler". */
function listed(held: Charge[]): string {
  const items = [
    ...held.filter((c) => c.kind === "base").map((c) => `the base '${c.name}'`),
    ...(["model", "sampler"] as const).flatMap((k) => {
      const n = held.filter((c) => c.kind === k).length;
      return n ? [count(n, k)] : [];
    }),
  ];
  return items.length > 1 ? `${items.slice(0, -1).join(", ")} and ${items[items.length - 1]}` : items.join("");
}

export class MemoryLedger {
  private readonly held = new Map<string, Charge>();
  readonly budget: { bytes: number; source: string };
  private readonly activationBytes: number;

  constructor(opts: LocalEngineOptions) {
    const b = memoryBudget(opts.memoryGb);
    const share = `${Math.round(DEFAULT_MEMORY_SHARE * 100)}% of ${gib(totalmem())}`;
    this.budget = { bytes: b.bytes, source: opts.memoryGb !== undefined ? "--memory-gb" : share };
    this.activationBytes = opts.microBatchBytes ?? DEFAULT_NATIVE_ACTIVATION_BUDGET;
  }

  private sum(charges: Charge[]): number {
    const act = charges.some((c) => c.trains) ? this.activationBytes : 0;
    return charges.reduce((s, c) => s + bytesOf(c), act);
  }

  /** Holds `charges` together, or (a 429) none of them when they would pass the budget; `asked` names the request. */
  admit(asked: string, charges: Charge[]): void {
    const now = [...this.held.values()];
    const fresh = charges.filter((c) => !this.held.has(c.key));
    const before = this.sum(now),
      after = this.sum([...now, ...fresh]);
    if (after > this.budget.bytes) throw this.refusal(asked, fresh, after - before, before);
    for (const c of fresh) this.held.set(c.key, c);
  }

  release(key: string): void {
    this.held.delete(key);
  }

  /** One line, short enough to reach the client whole (it shows 300 characters of a detail). */
  private refusal(asked: string, fresh: Charge[], more: number, before: number): TinkerError {
    const total = (pick: (c: Charge) => number) => fresh.reduce((s, c) => s + pick(c), 0);
    const weights = total((c) => c.weights),
      training = total((c) => c.training);
    const held = [...this.held.values()];
    const activations = fresh.some((c) => c.trains) && !held.some((c) => c.trains);
    const parts = [
      weights ? `weights ${gib(weights)}` : "",
      training ? `${weights ? "" : "adapters, "}gradients and optimizer state ${gib(training)}` : "",
      `KV cache ${gib(total((c) => c.kv))}`,
      activations ? `activations ${gib(this.activationBytes)}` : "",
    ].filter(Boolean);
    const holders = held.length ? ` for ${listed(held)}` : "";
    return new TinkerError(
      `${asked} needs ${gib(more)} (${parts.join(", ")}); this server holds ${gib(before)} of its ${gib(this.budget.bytes)} budget (${this.budget.source})${holders}; unload a model or serve with a larger --memory-gb`,
      undefined,
      429,
    );
  }
}
