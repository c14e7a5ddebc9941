/**
 * `train(recipe, options)`: a whole training run from a program, as `agent-r1 train` runs it. The
 * recipe is a YAML file's path or an object of the same shape (overrides `key.path=value` apply to
 * either; without a recipe, `resume` reads the run's config.yaml). The task is loaded (a module's
 * MCP servers started), the engines built from `engine.kind` unless `engines` is given, and the
 * trainer runs to `train.iterations`; the trainer and the task (its MCP servers) are closed however
 * the run ends. Returns the run directory, the parsed recipe and each iteration's metrics.
 *
 *   import { train } from "agent-r1";
 *   await train({ model: { preset: "tiny" }, task: { module: "./my-tools.ts" } }, { out: "runs/x" });
 */
import { join } from "node:path";
import type { EngineFactory } from "../engine/factory.js";
import { enginesFor } from "../engine/engines-for.js";
import { loadTask } from "../tasks/index.js";
import type { Task } from "../tasks/types.js";
import type { TrainConfig } from "./config.js";
import { absoluteTaskPaths, applyOverride, loadConfig, parseConfig } from "./load-config.js";
import { Trainer, type IterationMetrics } from "./trainer.js";
import type { JudgeReward } from "../rewards/judge.js";

export interface TrainRunOptions {
  /** The run directory: new or empty (or, with `resume`, the run to continue). Default runs/run-TIMESTAMP. */
  out?: string;
  /** Continue the run in `out` from its newest checkpoint that verifies. */
  resume?: boolean;
  /** Start over in a non-empty `out` (what is there is deleted). */
  force?: boolean;
  /** `key.path=value` overrides of the recipe. */
  overrides?: string[];
  /** Where the models come from; default the recipe's `engine` section (`enginesFor`). */
  engines?: EngineFactory;
  /** A judge reward built in code (`judgeReward({...})`), instead of the recipe's `reward.judge`. */
  judge?: JudgeReward;
  /** The trainer's notes and warnings, one line each; default stderr. */
  log?: (line: string) => void;
  /** Once the run is open: the recipe, the task, the iteration it resumes after (0 for a new run). */
  onStart?: (run: { config: TrainConfig; task: Task; out: string; iteration: number }) => void;
  onIteration?: (m: IterationMetrics) => void;
}

export interface TrainRunResult {
  out: string;
  config: TrainConfig;
  /** The metrics of the iterations this call ran (also in out/metrics.jsonl). */
  metrics: IterationMetrics[];
}

const toStderr = (line: string) => void process.stderr.write(`${line}\n`);

/** The recipe as the schema checks it: a file, an object (copied, not changed) or the run's config.yaml. */
function readRecipe(recipe: string | object | undefined, out: string, o: TrainRunOptions): TrainConfig {
  const overrides = o.overrides ?? [];
  if (typeof recipe === "string") return loadConfig(recipe, overrides);
  if (recipe === undefined) return loadConfig(o.resume ? join(out, "config.yaml") : undefined, overrides);
  const raw = structuredClone(recipe) as Record<string, unknown>;
  for (const ov of overrides) applyOverride(raw, ov);
  return absoluteTaskPaths(parseConfig(raw, "recipe"));
}

export async function train(recipe?: string | object, o: TrainRunOptions = {}): Promise<TrainRunResult> {
  const out = o.out ?? `runs/run-${new Date().toISOString().replace(/[:.]/g, "-")}`;
  const log = o.log ?? toStderr;
  const config = readRecipe(recipe, out, o);
  const task = await loadTask(config.task);
  const metrics: IterationMetrics[] = [];
  try {
    const trainer = await Trainer.open(config, {
      out,
      task,
      engines: o.engines ?? enginesFor(config.engine, log, { runDir: out }),
      resume: o.resume === true,
      force: o.force === true,
      ...(o.judge ? { judge: o.judge } : {}),
      log,
    });
    try {
      o.onStart?.({ config, task, out, iteration: trainer.iteration });
      while (trainer.iteration < config.train.iterations) {
        const m = await trainer.step();
        metrics.push(m);
        o.onIteration?.(m);
      }
    } finally {
      await trainer.close();
    }
  } finally {
    await task.close?.();
  }
  return { out, config, metrics };
}
