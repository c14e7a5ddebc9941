/**
 * What a `create_model` asks `serve --tinker` to train, from its `lora_config` (Tinker's
 * LoraConfig: rank, seed, train_attn, train_mlp, train_unembed): LoRA adapters of that rank over
 * the shared base, or the full weights when there is no lora_config (null or left out) or its rank
 * is 0. The adapters' scale is 1 (alpha = rank), with no dropout, as the local engine's own
 * default (engine.lora) is. A switch left out is on, but train_unembed only where the model's head
 * is its own (an untied head); asking for the head of a tied-embedding model is refused, as
 * engine.lora refuses it, since the same matrix is the input embedding.
 */
import type { ModelConfig } from "../../model/config.js";
import { loraModules, targetsFromTinker, type LoraSpec } from "../../model/peft-targets.js";
import { TinkerError } from "../../engine/remote/tinker-error.js";
import { InputError } from "../../util/errors.js";
import { bad, obj } from "./wire-input.js";

/** What a model trains: its full weights, or LoRA adapters of `spec` drawn from `seed`. */
export type Training = { kind: "full" } | { kind: "lora"; spec: LoraSpec; seed: number };

/** A switch of lora_config: true or false, `fallback` when left out. */
function flag(o: Record<string, unknown>, key: string, fallback: boolean): boolean {
  const v = o[key];
  if (v === undefined || v === null) return fallback;
  if (typeof v !== "boolean") throw bad(`lora_config.${key}`, "true or false", v);
  return v;
}

/** The rank: an integer from 0 (full weights) to the hidden size. */
function rankOf(o: Record<string, unknown>, config: ModelConfig): number {
  const r = o.rank;
  if (!Number.isSafeInteger(r) || (r as number) < 0 || (r as number) > config.hiddenSize)
    throw bad("lora_config.rank", `an integer from 0 (full weights) to the hidden size ${config.hiddenSize}`, r);
  return r as number;
}

export function trainingOf(raw: unknown, config: ModelConfig): Training {
  if (raw === undefined || raw === null) return { kind: "full" };
  const o = obj(raw, "lora_config");
  const rank = rankOf(o, config);
  if (rank === 0) return { kind: "full" };
  const seed = o.seed === undefined || o.seed === null ? 0 : o.seed;
  if (!Number.isSafeInteger(seed)) throw bad("lora_config.seed", "an integer", seed);
  const targets = targetsFromTinker({
    trainAttn: flag(o, "train_attn", true),
    trainMlp: flag(o, "train_mlp", true),
    trainUnembed: flag(o, "train_unembed", !config.tieWordEmbeddings),
  });
  if (targets.length === 0)
    throw new TinkerError("lora_config: train_attn, train_mlp and train_unembed are all false, so nothing would train");
  try {
    loraModules(config, targets);
  } catch (e) {
    if (e instanceof InputError) throw new TinkerError(`lora_config.train_unembed: ${e.message}`);
    throw e;
  }
  return { kind: "lora", spec: { rank, alpha: rank, dropout: 0, targets, rslora: false }, seed: seed as number };
}

/** In words, for logs and errors: "LoRA rank 8 (attention + MLP)" (without `targets`, "LoRA rank 8") or "full weights". */
export function describeTraining(t: Training, targets = true): string {
  if (t.kind === "full") return "full weights";
  if (!targets) return `LoRA rank ${t.spec.rank}`;
  const parts = [
    t.spec.targets.includes("q_proj") ? "attention" : "",
    t.spec.targets.includes("gate_proj") ? "MLP" : "",
    t.spec.targets.includes("lm_head") ? "unembedding" : "",
  ].filter(Boolean);
  return `LoRA rank ${t.spec.rank} (${parts.join(" + ")})`;
}
