/**
 * The main job: RL from a base checkpoint on a task, evaluated greedily on the held-out test
 * split before and after, within a wall-clock budget. `agent-r1 main` runs it with the
 * multi-hop recipe and the committed base (assets/base/multihop). The policy with the best
 * validation exact match (train.valEvery, train.valSize) is kept as best/ and is the one the
 * test split evaluates after training; the final policy is kept too (the last checkpoint) and
 * evaluated beside it. The run directory keeps config.yaml, metrics.jsonl, samples,
 * checkpoints, best/ and eval.json (the evaluations).
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import type { EngineFactory } from "../engine/factory.js";
import type { Split, Task } from "../tasks/types.js";
import type { TrainConfig } from "./config.js";
import { checkPlayed, playRows, type EpisodeSummary } from "./evaluate.js";
import { Trainer, type IterationMetrics } from "./trainer.js";

export interface MainJobOptions {
  /** The base model directory (also the config's model.path). */
  base: string;
  out: string;
  engines: EngineFactory;
  /** Training stops starting new iterations after this many minutes (evaluations included). */
  budgetMinutes: number;
  /** Start over in a non-empty `out` (see the trainer's `force`). */
  force?: boolean;
  /** Progress lines for a person (stdout). */
  say?: (line: string) => void;
  /** Notes and warnings (stderr). */
  log?: (line: string) => void;
  /** After each training iteration. */
  onIteration?: (m: IterationMetrics) => void;
  /**
   * Other splits evaluated (greedy) with the base and with the policy the test split evaluates after
   * training: the household task's seen houses are its val split, its unseen ones the test split.
   */
  alsoEvaluate?: Split[];
}

export interface MainJobResult {
  out: string;
  before: EpisodeSummary;
  /** The policy with the best validation exact match (the final one when nothing was validated). */
  after: EpisodeSummary;
  /** The final policy (the same as `after` when it is the best). */
  final: EpisodeSummary;
  /** The iteration `after` comes from, and its validation exact match (absent without validation). */
  best: { iteration: number; valEm?: number };
  iterations: number;
  minutes: number;
  /** The advantage estimator that trained (the recipe's `algorithm.estimator`, upper-cased: GRPO, RLOO, ...). */
  algorithm: string;
  /** The `alsoEvaluate` splits: the base and the `after` policy on each. */
  splits: Partial<Record<Split, { rows: number; before: EpisodeSummary; after: EpisodeSummary }>>;
}

export async function runMainJob(cfg: TrainConfig, task: Task, o: MainJobOptions): Promise<MainJobResult> {
  const t0 = Date.now();
  const trainer = await Trainer.open(cfg, {
    out: o.out,
    task,
    engines: o.engines,
    force: o.force,
    command: "main",
    log: o.log,
  });
  const testRows = task.rows("test");
  const r = cfg.rollout;
  const evaluate = async (rows = testRows) => {
    const played = await playRows(trainer.policy, trainer.policy.tokenizer, task, rows, {
      greedy: true,
      maxTurns: r.maxTurns,
      maxTokensPerTurn: r.maxTokensPerTurn,
      maxTotalTokens: r.maxTotalTokens,
      compaction: r.compaction,
      seed: 0,
    });
    const failures = checkPlayed("main: evaluation", rows, played.result);
    if (failures) o.log?.(failures);
    return played.summary;
  };
  try {
    const algorithm = cfg.algorithm.estimator.toUpperCase();
    o.say?.(
      `main: ${algorithm} on '${task.name}' from ${o.base}, ${cfg.train.iterations} iterations x ${cfg.train.batchSize} questions x ${r.n} samples (budget ${o.budgetMinutes} min) → ${o.out}` +
        (trainer.policy.describe ? `; ${trainer.policy.describe()}` : ""),
    );
    const before = await evaluate();
    const other = (o.alsoEvaluate ?? []).map((split) => ({ split, rows: task.rows(split) }));
    const othersBefore = [];
    for (const x of other) othersBefore.push(await evaluate(x.rows));
    o.say?.(
      `base on ${testRows.length} held-out questions (greedy): exact match ${pct(before.em)}, ${before.toolCalls.toFixed(2)} tool calls, ${before.responseTokens.toFixed(0)} response tokens`,
    );
    const bestDir = join(o.out, "best");
    let best = await trainWithinBudget(trainer, cfg, o, bestDir, t0 + o.budgetMinutes * 60_000);
    const final = await evaluate();
    let after = final;
    if (best.valEm === undefined) best = { iteration: trainer.iteration };
    else if (best.iteration !== trainer.iteration) {
      o.say?.(
        `main: the final policy (iteration ${trainer.iteration}) on the test split: exact match ${pct(final.em)}; now the best on validation, iteration ${best.iteration} (${pct(best.valEm)}), kept in ${bestDir}`,
      );
      await trainer.policy.load(bestDir);
      after = await evaluate();
    }
    const splits: MainJobResult["splits"] = {};
    for (const [i, x] of other.entries())
      splits[x.split] = { rows: x.rows.length, before: othersBefore[i], after: await evaluate(x.rows) };
    const minutes = (Date.now() - t0) / 60_000;
    const result: MainJobResult = {
      out: o.out,
      before,
      after,
      final,
      best,
      iterations: trainer.iteration,
      minutes,
      algorithm,
      splits,
    };
    writeFileSync(
      join(o.out, "eval.json"),
      JSON.stringify({ split: "test", rows: testRows.length, greedy: true, ...result }, null, 2) + "\n",
    );
    return result;
  } finally {
    await trainer.close();
  }
}

/**
 * Trains until the recipe's iterations or the deadline (ms since the epoch), keeping the policy with
 * the best validation exact match in `bestDir`; then stops the rollouts (train.async) and, when the
 * deadline ended it, writes a checkpoint. Returns the best iteration (iteration 0 without validation).
 */
async function trainWithinBudget(
  trainer: Trainer,
  cfg: TrainConfig,
  o: MainJobOptions,
  bestDir: string,
  deadline: number,
): Promise<{ iteration: number; valEm?: number }> {
  let best: { iteration: number; valEm?: number } = { iteration: 0 };
  while (trainer.iteration < cfg.train.iterations && Date.now() < deadline) {
    const m = await trainer.step();
    o.onIteration?.(m);
    const valEm = m["val/em"];
    if (valEm !== undefined && (best.valEm === undefined || valEm > best.valEm)) {
      await trainer.policy.save(bestDir);
      best = { iteration: m.iteration, valEm };
    }
  }
  await trainer.stopRollouts(); // train.async: nothing samples beside the evaluations that follow
  if (trainer.iteration < cfg.train.iterations) {
    o.say?.(`main: time budget reached after ${trainer.iteration} iterations`);
    await trainer.checkpoint(trainer.iteration);
  }
  return best;
}

export const pct = (x: number) => `${(100 * x).toFixed(1)}%`;
