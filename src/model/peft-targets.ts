/**
 * The vocabulary of LoRA adapters for the Qwen2 / Qwen3 / Llama decoder: the modules a LoRA can target,
 * the spec (rank, alpha, targets, rsLoRA), Tinker's switches for them, and the adapted modules of a
 * model with their shapes. PEFT's file format is in ./peft.ts, its adapter_config.json in
 * ./peft-config.ts.
 */
import type { ModelConfig } from "./config.js";
import { InputError } from "../util/errors.js";

export const ADAPTER_CONFIG_FILE = "adapter_config.json";
export const ADAPTER_WEIGHTS_FILE = "adapter_model.safetensors";
/** The prefix PEFT puts in front of the base model's module paths (PeftModel.base_model.model). */
export const PREFIX = "base_model.model.";

/** The linear modules of the decoder a LoRA can adapt, in the order adapters are listed. */
export const LORA_TARGETS = [
  "q_proj",
  "k_proj",
  "v_proj",
  "o_proj",
  "gate_proj",
  "up_proj",
  "down_proj",
  "lm_head",
] as const;
export type LoraTarget = (typeof LORA_TARGETS)[number];
export const ATTN_TARGETS: readonly LoraTarget[] = ["q_proj", "k_proj", "v_proj", "o_proj"];
export const MLP_TARGETS: readonly LoraTarget[] = ["gate_proj", "up_proj", "down_proj"];
export const isTarget = (s: string): s is LoraTarget => (LORA_TARGETS as readonly string[]).includes(s);
export const SUPPORTED = LORA_TARGETS.join(", ");

export interface LoraSpec {
  rank: number;
  alpha: number;
  dropout: number;
  /** In LORA_TARGETS order. */
  targets: LoraTarget[];
  /** Rank-stabilized scaling, alpha / sqrt(r). */
  rslora: boolean;
}

/** One module's adapter: A is (r, in) and B is (out, r), row-major, as PEFT stores them. */
export interface LoraAdapter {
  a: Float32Array;
  b: Float32Array;
}
/** Keyed by the base parameter name without ".weight": "model.layers.0.self_attn.q_proj", "lm_head". */
export type LoraAdapters = Map<string, LoraAdapter>;

/** The factor on B·A: alpha / r, or alpha / sqrt(r) with rsLoRA. */
export function loraScale(spec: Pick<LoraSpec, "rank" | "alpha" | "rslora">): number {
  return spec.rslora ? spec.alpha / Math.sqrt(spec.rank) : spec.alpha / spec.rank;
}

/** Targets in canonical (LORA_TARGETS) order, without repeats. */
export const canonical = (targets: Iterable<LoraTarget>): LoraTarget[] => {
  const set = new Set(targets);
  return LORA_TARGETS.filter((t) => set.has(t));
};

/** Tinker's LoRA switches as PEFT targets: attention = q, k, v, o; MLP = gate, up, down; unembedding = lm_head. */
export function targetsFromTinker(o: { trainAttn: boolean; trainMlp: boolean; trainUnembed: boolean }): LoraTarget[] {
  return canonical([
    ...(o.trainAttn ? ATTN_TARGETS : []),
    ...(o.trainMlp ? MLP_TARGETS : []),
    ...(o.trainUnembed ? (["lm_head"] as const) : []),
  ]);
}

/**
 * The reverse: Tinker's switches for a target list, or undefined when the list takes part of a
 * group (say q_proj and v_proj only), which Tinker cannot express.
 */
export function tinkerFromTargets(
  targets: readonly LoraTarget[],
): { trainAttn: boolean; trainMlp: boolean; trainUnembed: boolean } | undefined {
  const set = new Set(targets);
  const group = (g: readonly LoraTarget[]) => {
    const n = g.filter((t) => set.has(t)).length;
    return n === 0 ? false : n === g.length ? true : undefined;
  };
  const trainAttn = group(ATTN_TARGETS),
    trainMlp = group(MLP_TARGETS);
  if (trainAttn === undefined || trainMlp === undefined) return undefined;
  return { trainAttn, trainMlp, trainUnembed: set.has("lm_head") };
}

/** In words, for logs: "attention (q_proj, k_proj, v_proj, o_proj) + MLP (...) + unembedding (lm_head)". */
export function describeTargets(targets: readonly LoraTarget[]): string {
  const t = canonical(targets);
  if (t.length === 0) return "no modules";
  const parts: string[] = [];
  const attn = t.filter((x) => ATTN_TARGETS.includes(x)),
    mlp = t.filter((x) => MLP_TARGETS.includes(x));
  if (attn.length) parts.push(`attention (${attn.join(", ")})`);
  if (mlp.length) parts.push(`MLP (${mlp.join(", ")})`);
  if (t.includes("lm_head")) parts.push("unembedding (lm_head)");
  return parts.join(" + ");
}

/** One linear module a LoRA adapts: its Hugging Face path (the weight's name without ".weight") and (out, in). */
export interface LoraModule {
  path: string;
  target: LoraTarget;
  out: number;
  in: number;
}

export const TIED_HEAD =
  "lm_head is targeted but this model ties the head to the input embedding (tie_word_embeddings in config.json): " +
  "the head is model.embed_tokens, one matrix that a LoRA on lm_head would change for the input too; " +
  "leave lm_head out (train_unembed false) or use an untied model";

/** The (out, in) of each target in this model (the shapes of parameterShapes in transformer.ts). */
function targetShapes(c: ModelConfig): Record<LoraTarget, [number, number]> {
  const h = c.hiddenSize,
    q = c.numHeads * c.headDim,
    kv = c.numKvHeads * c.headDim,
    f = c.intermediateSize;
  return {
    q_proj: [q, h],
    k_proj: [kv, h],
    v_proj: [kv, h],
    o_proj: [h, q],
    gate_proj: [f, h],
    up_proj: [f, h],
    down_proj: [h, f],
    lm_head: [c.vocabSize, h],
  };
}

export const modulePath = (layer: number, t: LoraTarget): string =>
  t === "lm_head" ? "lm_head" : `model.layers.${layer}.${ATTN_TARGETS.includes(t) ? "self_attn" : "mlp"}.${t}`;

/**
 * The modules a spec's targets adapt in this model, layer by layer (targets in LORA_TARGETS order
 * within a layer), then lm_head. Throws an InputError for lm_head on a tied-embedding model.
 */
export function loraModules(config: ModelConfig, targets: readonly LoraTarget[]): LoraModule[] {
  const t = canonical(targets);
  if (t.includes("lm_head") && config.tieWordEmbeddings) throw new InputError(TIED_HEAD);
  const shapes = targetShapes(config);
  const out: LoraModule[] = [];
  for (let i = 0; i < config.numLayers; i++)
    for (const target of t) if (target !== "lm_head") out.push(mod(modulePath(i, target), target, shapes));
  if (t.includes("lm_head")) out.push(mod("lm_head", "lm_head", shapes));
  return out;
}
const mod = (path: string, target: LoraTarget, shapes: Record<LoraTarget, [number, number]>): LoraModule => ({
  path,
  target,
  out: shapes[target][0],
  in: shapes[target][1],
});
