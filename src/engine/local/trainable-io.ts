/** Saving and loading a trainable model: HF weights, optimizer moments (in-memory layout) and the step counter. */
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { readJsonFile, writeModelDir } from "../../model/model-dir.js";
import { readSafetensorsFile, writeSafetensorsFile, type HostTensor, type RawTensor } from "../../model/safetensors.js";
import type { ModelConfig } from "../../model/config.js";
import { ModelFormatError } from "../../util/errors.js";

export const OPTIMIZER_FILE = "optimizer.safetensors";
export const STATE_FILE = "trainer_state.json";

/** What either engine's trainable model (TF.js Trainable, NativeTrainable) offers for saving. */
export interface SavableTrainable {
  readonly model: { readonly config: ModelConfig; toHostWeights(): Map<string, HostTensor | RawTensor> };
  step: number;
  optimizerState(): Map<string, HostTensor>;
  loadOptimizerState(state: Map<string, HostTensor>, step: number): void;
}

/** Writes weights, optimizer moments and the step counter of a trainable model as one directory. */
export function saveTrainable(tr: SavableTrainable, dir: string, tokenizerFrom: string): void {
  writeModelDir(dir, {
    config: tr.model.config.raw,
    weights: tr.model.toHostWeights(),
    tokenizerFrom,
    extra: (tmp) => {
      const state = tr.optimizerState();
      if (state.size) writeSafetensorsFile(join(tmp, OPTIMIZER_FILE), state);
      writeFileSync(join(tmp, STATE_FILE), JSON.stringify({ step: tr.step }) + "\n");
    },
  });
}

/** The optimizer step recorded in a directory (0 when it holds none); a malformed file is a ModelFormatError naming it. */
export function readTrainerStep(dir: string): number {
  const file = join(dir, STATE_FILE);
  if (!existsSync(file)) return 0;
  const step = (readJsonFile(file) as { step?: unknown } | null)?.step;
  if (!(typeof step === "number" && Number.isInteger(step) && step >= 0))
    throw new ModelFormatError(file, "step", `must be a non-negative integer, got ${JSON.stringify(step)}`);
  return step;
}

/** Whether a directory holds optimizer moments. */
export function hasOptimizerState(dir: string): boolean {
  return existsSync(join(dir, OPTIMIZER_FILE));
}

export function loadTrainableState(tr: SavableTrainable, dir: string): void {
  const step = readTrainerStep(dir);
  if (existsSync(join(dir, OPTIMIZER_FILE)))
    tr.loadOptimizerState(readSafetensorsFile(join(dir, OPTIMIZER_FILE)).tensors, step);
  else tr.step = step;
}
