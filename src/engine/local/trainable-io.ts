/** Saving and loading a trainable model: HF weights, optimizer moments (in-memory layout) and the step counter. */
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Trainable } from "./trainable.js";
import { writeModelDir } from "../../model/model-dir.js";
import { readSafetensorsFile, writeSafetensorsFile } from "../../model/safetensors.js";

export const OPTIMIZER_FILE = "optimizer.safetensors";
export const STATE_FILE = "trainer_state.json";

/** Writes weights, optimizer moments and the step counter of a trainable model as one directory. */
export function saveTrainable(tr: Trainable, dir: string, tokenizerFrom: string): void {
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

/** The optimizer step recorded in a directory (0 when it holds none). */
export function readTrainerStep(dir: string): number {
  return existsSync(join(dir, STATE_FILE)) ? (JSON.parse(readFileSync(join(dir, STATE_FILE), "utf8")).step as number) : 0;
}

export function loadTrainableState(tr: Trainable, dir: string): void {
  const step = readTrainerStep(dir);
  if (existsSync(join(dir, OPTIMIZER_FILE))) tr.loadOptimizerState(readSafetensorsFile(join(dir, OPTIMIZER_FILE)).tensors, step);
  else tr.step = step;
}
