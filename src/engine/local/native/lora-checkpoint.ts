/**
 * Checkpoints of a LoRA run: the adapters in PEFT's format (adapter_config.json +
 * adapter_model.safetensors, which Hugging Face PEFT and vLLM load), their optimizer moments and
 * step, the base model's config.json and tokenizer files (so every command reads the directory
 * as it reads a model), and the base model's directory in adapter_config.json's
 * base_model_name_or_path, as an absolute path: the base weights are not copied. A LoRA critic
 * also keeps its value head (score.weight, (1, hidden)) in value_head.safetensors beside them.
 */
import { existsSync, writeFileSync } from "node:fs";
import { isAbsolute, join, resolve } from "node:path";
import { copyTokenizerFiles, readJsonFile } from "../../../model/model-dir.js";
import {
  ADAPTER_CONFIG_FILE,
  readPeftAdapter,
  writePeftAdapter,
  type LoraAdapters,
  type LoraSpec,
} from "../../../model/peft.js";
import type { ModelConfig } from "../../../model/config.js";
import { SINGLE_FILE, INDEX_FILE, readSafetensorsFile, writeSafetensorsFile } from "../../../model/safetensors.js";
import { OPTIMIZER_FILE, STATE_FILE } from "../trainable-io.js";
import { writeDirectory } from "../../../util/atomic-write.js";
import { ModelFormatError } from "../../../util/errors.js";
import type { NativeTrainable } from "./native-trainable.js";

/** A directory of adapters without base weights: a LoRA checkpoint, or a PEFT adapter. */
export function isLoraDir(dir: string): boolean {
  return (
    existsSync(join(dir, ADAPTER_CONFIG_FILE)) &&
    !existsSync(join(dir, SINGLE_FILE)) &&
    !existsSync(join(dir, INDEX_FILE))
  );
}

/** The base model directory a LoRA directory names (base_model_name_or_path), checked to exist. */
export function loraBaseDir(dir: string): string {
  const file = join(dir, ADAPTER_CONFIG_FILE);
  const base = (readJsonFile(file) as { base_model_name_or_path?: unknown } | null)?.base_model_name_or_path;
  if (typeof base !== "string" || base === "")
    throw new ModelFormatError(
      file,
      "base_model_name_or_path",
      "names no base model directory",
      "set it to the directory of the base model these adapters were trained on",
    );
  const path = isAbsolute(base) ? base : resolve(dir, base);
  if (!existsSync(join(path, "config.json")))
    throw new ModelFormatError(
      file,
      "base_model_name_or_path",
      `${base} is not a model directory here (no config.json); nothing is downloaded`,
      "point it at the base model's directory on this machine",
    );
  return path;
}

/** The adapters of a LoRA directory for a base model with `config`. */
export function readLoraDir(dir: string, config: ModelConfig): { spec: LoraSpec; adapters: LoraAdapters } {
  const { spec, adapters } = readPeftAdapter(dir, config);
  return { spec, adapters };
}

/** The file of a LoRA critic's value head. */
export const VALUE_HEAD_FILE = "value_head.safetensors";

/** A LoRA critic's value head (hidden), or undefined when the directory holds none. */
export function readValueHead(dir: string): Float32Array | undefined {
  const file = join(dir, VALUE_HEAD_FILE);
  if (!existsSync(file)) return undefined;
  const t = readSafetensorsFile(file).tensors.get("score.weight");
  if (!t) throw new ModelFormatError(file, "score.weight", "tensor missing");
  return t.data;
}

/**
 * Writes the adapters of `tr` (a LoRA model) alone, in PEFT's layout (adapter_config.json +
 * adapter_model.safetensors), atomically: what an inference server loads between RL steps.
 */
export function saveLoraAdapter(tr: NativeTrainable, dir: string): void {
  const model = tr.model;
  if (!model.lora) throw new Error("internal: saveLoraAdapter on a model without LoRA");
  writePeftAdapter(dir, model.lora.spec, model.loraAdapters(), {
    baseModel: resolve(tr.baseDir),
    config: model.config,
  });
}

/** Writes a LoRA checkpoint of `tr` (a LoRA model) to dir, atomically. */
export function saveLoraTrainable(tr: NativeTrainable, dir: string, baseDir: string, tokenizerFrom: string): void {
  const model = tr.model;
  if (!model.lora) throw new Error("internal: saveLoraTrainable on a model without LoRA");
  writeDirectory(dir, (tmp) => {
    // first, while tmp is empty: writePeftAdapter fills it through its own temporary directory
    writePeftAdapter(tmp, model.lora!.spec, model.loraAdapters(), {
      baseModel: resolve(baseDir),
      config: model.config,
    });
    writeFileSync(join(tmp, "config.json"), JSON.stringify(model.config.raw, null, 2) + "\n");
    if (model.head === "value") {
      const score = model.params.get("score.weight")!;
      writeSafetensorsFile(
        join(tmp, VALUE_HEAD_FILE),
        new Map([["score.weight", { shape: [1, score.data.length], data: score.data as Float32Array }]]),
      );
    }
    copyTokenizerFiles(tokenizerFrom, tmp);
    const state = tr.optimizerState();
    if (state.size) writeSafetensorsFile(join(tmp, OPTIMIZER_FILE), state);
    writeFileSync(join(tmp, STATE_FILE), JSON.stringify({ step: tr.step }) + "\n");
  });
}
