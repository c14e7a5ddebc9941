/**
 * A Hugging Face model directory: config.json, model.safetensors (or a sharded
 * index), tokenizer.json and tokenizer_config.json. Reading checks that every
 * file is present and parses; writing goes to a temporary directory that is
 * renamed into place, so a failed write never leaves a half-written model.
 */
import { copyFileSync, existsSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { parseModelConfig, type ModelConfig } from "./config.js";
import { checkModelFits, checkWeightFiles } from "./model-limits.js";
import {
  loadModelWeights,
  loadModelWeightsRaw,
  weightsFile,
  saveModelWeights,
  type DType,
  type HostTensor,
  type RawTensor,
} from "./safetensors.js";
import { checkFiniteTensors } from "./finite-weights.js";
import { Tokenizer } from "./tokenizer.js";
import { ModelFormatError } from "../util/errors.js";
import { readTextInput } from "../util/read-file.js";
import { writeDirectory } from "../util/atomic-write.js";

/**
 * Tokenizer-side files copied verbatim when a model is written back. Newer
 * releases keep the chat template in chat_template.jinja instead of
 * tokenizer_config.json, and Tokenizer.fromDir reads it, so it travels too.
 */
export const TOKENIZER_FILES = [
  "tokenizer.json",
  "tokenizer_config.json",
  "chat_template.jinja",
  "special_tokens_map.json",
  "generation_config.json",
];

export function readJsonFile(path: string): unknown {
  const text = readTextInput(path, (words) => new ModelFormatError(path, undefined, words));
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new ModelFormatError(path, undefined, `invalid JSON: ${(e as Error).message}`);
  }
}

export function readModelConfig(dir: string): ModelConfig {
  if (!existsSync(dir)) throw new ModelFormatError(dir, undefined, "model directory not found");
  if (!statSync(dir).isDirectory())
    throw new ModelFormatError(
      dir,
      undefined,
      "is a file, not a model directory",
      "give the directory that holds config.json",
    );
  const file = join(dir, "config.json");
  if (!existsSync(file) && existsSync(join(dir, "manifest.json")) && existsSync(join(dir, "policy", "config.json")))
    throw new ModelFormatError(
      dir,
      undefined,
      "is a training checkpoint, not a model directory",
      `give ${join(dir, "policy")}, or write a model with agent-r1 export --checkpoint ${dir} --out DIR`,
    );
  return parseModelConfig(readJsonFile(file), file);
}

export interface LoadedModelDir {
  dir: string;
  config: ModelConfig;
  tokenizer: Tokenizer;
  weights: Map<string, HostTensor>;
  /** The dtype the weights were stored in (the first tensor's). */
  dtype: DType;
}

/** Reads a model directory to run it: the model must fit in a replica, checked before any weight is read. */
export function loadModelDir(dir: string): LoadedModelDir {
  const config = readModelConfig(dir);
  checkModelFits(config, join(dir, "config.json"));
  const tokenizer = checkModelFiles(dir, config);
  const weights = loadModelWeights(dir);
  checkFiniteTensors(weightsFile(dir), weights);
  const first = weights.values().next().value;
  return { dir, config, tokenizer, weights, dtype: first?.dtype ?? "F32" };
}

/** A model directory with its weights in their stored dtype (16-bit ones as bits). */
export interface RawModelDir extends Omit<LoadedModelDir, "weights"> {
  weights: Map<string, RawTensor>;
}

/**
 * Reads a model directory keeping every weight in its stored dtype (the native engine's way):
 * no float32 copy, and no TF.js heap limit; the caller checks memory (engine/local/native/memory-plan.ts)
 * between `config` and `load`.
 */
export function openModelDirRaw(dir: string): { config: ModelConfig; load(): RawModelDir } {
  const config = readModelConfig(dir);
  return {
    config,
    load() {
      const tokenizer = checkModelFiles(dir, config);
      const weights = loadModelWeightsRaw(dir);
      const first = weights.values().next().value;
      return { dir, config, tokenizer, weights, dtype: first?.dtype ?? "F32" };
    },
  };
}

/** The tokenizer of a model directory, after checking it and the weight files against config.json. */
function checkModelFiles(dir: string, config: ModelConfig): Tokenizer {
  if (!existsSync(join(dir, "tokenizer.json")))
    throw new ModelFormatError(join(dir, "tokenizer.json"), undefined, "file not found");
  const tokenizer = Tokenizer.fromDir(dir);
  if (tokenizer.vocabSize > config.vocabSize) {
    throw new ModelFormatError(
      join(dir, "config.json"),
      "vocab_size",
      `${config.vocabSize} is smaller than the tokenizer's ${tokenizer.vocabSize} tokens`,
    );
  }
  checkWeightFiles(dir, config);
  return tokenizer;
}

export interface WriteModelOptions {
  config: Record<string, unknown>;
  weights: Map<string, HostTensor | RawTensor>;
  /** Directory whose tokenizer files are copied. */
  tokenizerFrom: string;
  /** Weight dtype to write; default: each tensor's own (16-bit raw tensors stay 16-bit, the rest float32). */
  dtype?: DType;
  /** Extra files (name → contents) written alongside, such as optimizer state. */
  extra?: (tmpDir: string) => void;
}

export const TORCH_DTYPE: Record<DType, string> = { F32: "float32", BF16: "bfloat16", F16: "float16" };

/** The dtype a tensor is written in: `dtype`, or its own (16-bit raw data keeps its dtype, the rest is F32). */
export const writtenDType = (t: HostTensor | RawTensor, dtype: DType | undefined): DType =>
  dtype ?? (t.data instanceof Uint16Array ? (t as RawTensor).dtype : "F32");

/** The written dtypes, most elements first (empty for no tensors). */
export function writtenDTypes(weights: Map<string, HostTensor | RawTensor>, dtype: DType | undefined): DType[] {
  const counts = new Map<DType, number>();
  for (const t of weights.values()) {
    const d = writtenDType(t, dtype);
    counts.set(d, (counts.get(d) ?? 0) + t.data.length);
  }
  return [...counts].sort((a, b) => b[1] - a[1]).map(([d]) => d);
}

/** Copies the tokenizer-side files `from` holds into `to`; returns their names. */
export function copyTokenizerFiles(from: string, to: string): string[] {
  const copied = TOKENIZER_FILES.filter((f) => existsSync(join(from, f)));
  for (const f of copied) copyFileSync(join(from, f), join(to, f));
  return copied;
}

/**
 * Writes a model directory through a temporary sibling (util/atomic-write.ts: atomic when DIR is
 * new, replaces a non-empty DIR): config.json with torch_dtype (and `dtype`, when the config has
 * that newer key) naming the dtype most weights are written in, the weights, the tokenizer files.
 */
export function writeModelDir(dir: string, o: WriteModelOptions): void {
  const main = TORCH_DTYPE[writtenDTypes(o.weights, o.dtype)[0] ?? "F32"];
  const config = { ...o.config, torch_dtype: main, ...("dtype" in o.config && { dtype: main }) };
  writeDirectory(dir, (tmp) => {
    writeFileSync(join(tmp, "config.json"), JSON.stringify(config, null, 2) + "\n");
    saveModelWeights(tmp, o.weights, o.dtype ? { dtype: o.dtype } : {});
    copyTokenizerFiles(o.tokenizerFrom, tmp);
    o.extra?.(tmp);
  });
}
