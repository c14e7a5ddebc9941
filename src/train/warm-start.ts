/**
 * Making a task's base checkpoint: a task tokenizer (unless one is given), a
 * fresh preset model, then SFT on a mixture of expert and careless
 * demonstrations (`quality` = the expert's share). The saved directory holds
 * no optimizer state: RL starts its own AdamW.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { EngineFactory } from "../engine/factory.js";
import { OPTIMIZER_FILE, STATE_FILE } from "../engine/local/trainable-io.js";
import type { PresetName } from "../model/config.js";
import { parameterCount } from "../model/config.js";
import { readModelConfig } from "../model/model-dir.js";
import type { Task } from "../tasks/types.js";
import { meanCrossEntropy, sftDatums, trainSft, type SftOptions } from "./sft.js";
import { buildTaskTokenizer } from "./task-tokenizer.js";
import { copyDatums, corpusWords } from "./copy-curriculum.js";

export interface WarmStartOptions {
  task: Task;
  out: string;
  preset: PresetName;
  /** A tokenizer directory; default: a task tokenizer of `vocabSize` ids trained on the spot on the demonstration tasks' text. */
  tokenizer?: string;
  vocabSize?: number;
  /** Share of expert demonstrations; the rest answer without searching or after one search. */
  quality: number;
  steps: number;
  batchSize: number;
  lr: number;
  seed: number;
  /** Where the model is made and trained (the CLI builds it from --backend: `localEngines`). */
  engines: EngineFactory;
  /** Start from this model directory (its tokenizer too) instead of a fresh `preset` model. */
  init?: string;
  /** Steps of the copying curriculum before the demonstrations (copy-curriculum.ts); 0 skips it. */
  copySteps?: number;
  /** The copying curriculum's peak learning rate (batch 32, warm-up 50, cosine). */
  copyLr?: number;
  /** Share of made-up words in the copying curriculum (copy-curriculum.ts `blend`). */
  copyBlend?: number;
  /**
   * Tasks whose train rows give the demonstrations and the copying curriculum's words; default
   * [task]. `trainWorlds` (tasks/worlds.ts) makes them: the task generated from other seeds.
   */
  demoTasks?: Task[];
  onStep?: SftOptions["onStep"];
  onCopyStep?: SftOptions["onStep"];
}

export interface WarmStartResult {
  dir: string;
  parameters: number;
  demonstrations: number;
  /** Cross-entropy on the demonstrations before and after (nats per assistant token). */
  lossBefore: number;
  lossAfter: number;
}

/**
 * The settings of the committed base (dev/LOG.md has the runs behind them). The copying
 * curriculum's rate matters most: at 3e-3 the small model never learns to copy (loss stays
 * near 2.3 nats/token); at 1e-3 it does, between steps 200 and 500. `trainQuestions` is the
 * number of demonstration questions (the task option `train` overrides it), drawn from `worlds`
 * worlds (trainWorlds). Quality 0.3 keeps the multi-hop base's greedy exact match under
 * the main job's 50 %; that base also weights its demonstrations towards the comparison and numeric
 * questions (`--option bridge=0.4 --option comparison=0.3 --option numeric=0.3`).
 */
export const WARM_START_DEFAULTS = {
  preset: "small",
  vocabSize: 1024,
  quality: 0.3,
  copySteps: 1200,
  copyLr: 1e-3,
  copyBlend: 0.5,
  steps: 1500,
  batchSize: 8,
  lr: 1e-3,
  seed: 0,
  trainQuestions: 8192,
  worlds: 64,
  // the tokenizer it trains when none is given: on the text of 8,192 questions, a lower threshold turns names into tokens
  tokenizerMinFrequency: 2000,
} as const;

export async function warmStart(o: WarmStartOptions): Promise<WarmStartResult> {
  const demoTasks = o.demoTasks ?? [o.task];
  const scratch = mkdtempSync(join(tmpdir(), "agent-r1-warm-"));
  try {
    let initDir = o.init;
    if (initDir === undefined) {
      const tokDir =
        o.tokenizer ??
        (
          await buildTaskTokenizer(demoTasks, {
            vocabSize: o.vocabSize ?? WARM_START_DEFAULTS.vocabSize,
            minFrequency: WARM_START_DEFAULTS.tokenizerMinFrequency,
            out: join(scratch, "tokenizer"),
            seed: o.seed,
          })
        ).dir;
      initDir = join(scratch, "init");
      await o.engines.initModel({ preset: o.preset, out: initDir, tokenizer: tokDir, seed: o.seed });
    }
    const parameters = parameterCount(readModelConfig(initDir));
    const engine = await o.engines.policy(initDir);
    try {
      if ((o.copySteps ?? 0) > 0) {
        const words = corpusWords(trainCorpus(demoTasks));
        const copies = copyDatums(engine.tokenizer, words, {
          count: 20_000,
          minWords: 3,
          maxWords: 12,
          seed: o.seed,
          blend: o.copyBlend ?? WARM_START_DEFAULTS.copyBlend,
        });
        await trainSft(engine, copies, {
          steps: o.copySteps!,
          batchSize: 32,
          lr: o.copyLr ?? WARM_START_DEFAULTS.copyLr,
          warmupSteps: 50,
          seed: o.seed,
          onStep: o.onCopyStep,
        });
      }
      const datums = demoTasks.flatMap((t, k) =>
        sftDatums(t, t.rows("train"), engine.tokenizer, { seed: o.seed + k, quality: o.quality }),
      );
      const probe = datums.slice(0, 64);
      const lossBefore = await meanCrossEntropy(engine, probe);
      await trainSft(engine, datums, {
        steps: o.steps,
        batchSize: o.batchSize,
        lr: o.lr,
        seed: o.seed,
        onStep: o.onStep,
      });
      const lossAfter = await meanCrossEntropy(engine, probe);
      await engine.save(o.out);
      for (const f of [OPTIMIZER_FILE, STATE_FILE]) rmSync(join(o.out, f), { force: true });
      return { dir: o.out, parameters, demonstrations: datums.length, lossBefore, lossAfter };
    } finally {
      await engine.dispose();
    }
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

/**
 * The text of the tasks' training rows and their demonstrations: no held-out entity of the task's own
 * world (another world may reuse one of its names, with facts drawn again).
 */
function* trainCorpus(tasks: Task[]): Generator<string> {
  for (const task of tasks)
    for (const demo of task.demonstrations(task.rows("train"), { seed: 0, quality: 1 }))
      for (const m of demo) yield m.content;
}
