/** Models and LoRA adapters the tests make: a tiny bf16 model directory, random non-zero adapters. */
import { join } from "node:path";
import { initModel } from "../src/model/init-model.js";
import { loadModelDir, writeModelDir } from "../src/model/model-dir.js";
import type { ModelConfig } from "../src/model/config.js";
import { loraModules, type LoraAdapters, type LoraSpec } from "../src/model/peft.js";
import { Rng } from "../src/util/rng.js";

/**
 * The tiny preset (seed `seed`) written to `root/f32`, then copied with bf16 weights to
 * `root/name`; returns that directory.
 */
export async function tinyBf16Model(root: string, name: string, seed: number): Promise<string> {
  const f32 = join(root, "f32");
  await initModel({ preset: "tiny", out: f32, seed });
  const m = loadModelDir(f32);
  const dir = join(root, name);
  writeModelDir(dir, { config: m.config.raw, weights: m.weights, tokenizerFrom: f32, dtype: "BF16" });
  return dir;
}

/** The tests' small LoRA: rank 4, alpha 8, on attention and MLP (the seven projections), no dropout. */
export const SMALL_LORA: LoraSpec = {
  rank: 4,
  alpha: 8,
  dropout: 0,
  targets: ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
  rslora: false,
};

/**
 * Random adapters for every module `spec` targets in a model shaped like `config`, as PEFT stores
 * them: A (r, in) and B (out, r), both normal times `scale` (non-zero, so they change the model),
 * drawn module by module, A then B, from one generator.
 */
export function randomAdapters(config: ModelConfig, spec: LoraSpec, seed: number, scale: number): LoraAdapters {
  const rng = new Rng(seed);
  const out: LoraAdapters = new Map();
  for (const m of loraModules(config, spec.targets))
    out.set(m.path, {
      a: Float32Array.from({ length: spec.rank * m.in }, () => scale * rng.normal()),
      b: Float32Array.from({ length: m.out * spec.rank }, () => scale * rng.normal()),
    });
  return out;
}
