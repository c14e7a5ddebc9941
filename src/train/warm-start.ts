/**
 * Making a task's base checkpoint: a task tokenizer (unless one is given), a
 * fresh preset model, then SFT on a mixture of expert and careless
 * demonstrations (`quality` = the expert's share). The saved directory holds
 * no optimizer state: RL starts its own AdamW.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { LocalEngine } from "../engine/local/local-engine.js";
import { OPTIMIZER_FILE, STATE_FILE } from "../engine/local/trainable-io.js";
import type { PresetName } from "../model/config.js";
import { initModel } from "../model/init-model.js";
import type { Task } from "../tasks/types.js";
import { meanCrossEntropy, sftDatums, trainSft, type SftOptions } from "./sft.js";
import { buildTaskTokenizer } from "./task-tokenizer.js";

export interface WarmStartOptions {
  task: Task;
  out: string;
  preset: PresetName;
  /** A tokenizer directory; default: a task tokenizer of `vocabSize` ids trained on the spot. */
  tokenizer?: string;
  vocabSize?: number;
  /** Share of expert demonstrations; the rest answer without searching or after one search. */
  quality: number;
  steps: number;
  batchSize: number;
  lr: number;
  seed: number;
  workers?: number;
  onStep?: SftOptions["onStep"];
}

export interface WarmStartResult {
  dir: string;
  parameters: number;
  demonstrations: number;
  /** Cross-entropy on the demonstrations before and after (nats per assistant token). */
  lossBefore: number;
  lossAfter: number;
}

export const WARM_START_DEFAULTS = { preset: "tiny", vocabSize: 1024, quality: 0.4, steps: 300, batchSize: 16, lr: 3e-3, seed: 0 } as const;

export async function warmStart(o: WarmStartOptions): Promise<WarmStartResult> {
  const scratch = mkdtempSync(join(tmpdir(), "agent-r1-warm-"));
  try {
    const tokDir = o.tokenizer ?? (await buildTaskTokenizer(o.task, { vocabSize: o.vocabSize ?? WARM_START_DEFAULTS.vocabSize, out: join(scratch, "tokenizer"), seed: o.seed })).dir;
    const init = await initModel({ preset: o.preset, out: join(scratch, "init"), tokenizer: tokDir, seed: o.seed });
    const engine = await LocalEngine.load(init.dir, { workers: o.workers });
    try {
      const rows = o.task.rows("train");
      const datums = sftDatums(o.task, rows, engine.tokenizer, { seed: o.seed, quality: o.quality });
      const probe = datums.slice(0, 64);
      const lossBefore = await meanCrossEntropy(engine, probe);
      await trainSft(engine, datums, { steps: o.steps, batchSize: o.batchSize, lr: o.lr, seed: o.seed, onStep: o.onStep });
      const lossAfter = await meanCrossEntropy(engine, probe);
      await engine.save(o.out);
      for (const f of [OPTIMIZER_FILE, STATE_FILE]) rmSync(join(o.out, f), { force: true });
      return { dir: o.out, parameters: init.parameters, demonstrations: datums.length, lossBefore, lossAfter };
    } finally {
      await engine.dispose();
    }
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}
