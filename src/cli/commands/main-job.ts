/**
 * The main job: GRPO on the multi-hop search task from the committed base
 * checkpoint (assets/base/multihop, made by `agent-r1 pretrain`). Evaluates
 * the base greedily on the held-out test split, trains with a progress bar
 * (recipes/multihop-grpo.yaml, within a wall-clock budget), evaluates again,
 * and prints exact match, tool calls per episode and response length before
 * and after. The run directory keeps config.yaml, metrics.jsonl, samples,
 * checkpoints and eval.json (both evaluations).
 */
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { defaultTokenizerDir } from "../../model/default-tokenizer.js";
import { getTask } from "../../tasks/index.js";
import { checkPlayed, playRows, type EpisodeSummary } from "../../train/evaluate.js";
import { loadConfig } from "../../train/load-config.js";
import { Trainer } from "../../train/trainer.js";
import { InputError } from "../../util/errors.js";
import { optionalNumber, parseFlags } from "../args.js";
import type { Command, CommandIO } from "../command.js";
import { FORCE_FLAG } from "../../util/out-path.js";
import { Progress } from "../progress.js";
import { summaryTable } from "./eval.js";
import { BACKEND_FLAG, BACKEND_USAGE, announceBackend, parseBackendFlag } from "./backend-flag.js";

/** The package root (assets/tokenizer is two levels below it). */
const packageRoot = () => join(defaultTokenizerDir(), "..", "..");

export const MAIN_JOB_DEFAULTS = {
  recipe: () => join(packageRoot(), "recipes", "multihop-grpo.yaml"),
  base: () => join(packageRoot(), "assets", "base", "multihop"),
  budgetMinutes: 13,
};

export interface MainJobOptions {
  recipe: string;
  base: string;
  out: string;
  /** key.path=value overrides of the recipe. */
  overrides?: string[];
  /** Training stops starting new iterations after this many minutes (evaluations included). */
  budgetMinutes: number;
  /** Start over in a non-empty `out` (see Trainer's `force`). */
  force?: boolean;
  /** Progress bar stream; default stderr. */
  stream?: NodeJS.WriteStream;
}

export interface MainJobResult {
  out: string;
  before: EpisodeSummary;
  after: EpisodeSummary;
  iterations: number;
  minutes: number;
  /** The advantage estimator that trained (the recipe's `algorithm.estimator`, upper-cased: GRPO, RLOO, ...). */
  algorithm: string;
}

export async function runMainJob(o: MainJobOptions, io: CommandIO): Promise<MainJobResult> {
  const t0 = Date.now();
  for (const [what, path] of [["recipe", o.recipe], ["base checkpoint", join(o.base, "config.json")]]) {
    if (!existsSync(path)) throw new InputError(`main: ${what} not found: ${path}`, what === "recipe" ? "pass --config RECIPE.yaml" : "run 'agent-r1 pretrain --task multihop --out assets/base/multihop' or pass --base DIR");
  }
  const cfg = loadConfig(o.recipe, [`model.path=${o.base}`, ...(o.overrides ?? [])]);
  announceBackend(cfg.engine.backend, io);
  const task = getTask(cfg.task.name, cfg.task.options);
  const trainer = await Trainer.open(cfg, { out: o.out, task, force: o.force, command: "main", log: (l) => io.err(l) });
  const testRows = task.rows("test");
  const r = cfg.rollout;
  const evaluate = async () => {
    const played = await playRows(trainer.policy, trainer.policy.tokenizer, task, testRows, { greedy: true, maxTurns: r.maxTurns, maxTokensPerTurn: r.maxTokensPerTurn, maxTotalTokens: r.maxTotalTokens, seed: 0 });
    const failures = checkPlayed("main: evaluation", testRows, played.result);
    if (failures) io.err(failures);
    return played.summary;
  };
  try {
    const algorithm = cfg.algorithm.estimator.toUpperCase();
    io.out(`main: ${algorithm} on '${task.name}' from ${o.base}, ${cfg.train.iterations} iterations x ${cfg.train.batchSize} questions x ${r.n} samples (budget ${o.budgetMinutes} min) → ${o.out}`);
    const before = await evaluate();
    io.out(`base on ${testRows.length} held-out questions (greedy): exact match ${pct(before.em)}, ${before.toolCalls.toFixed(2)} tool calls, ${before.responseTokens.toFixed(0)} response tokens`);
    const progress = new Progress({ label: cfg.algorithm.estimator, total: cfg.train.iterations, stream: o.stream });
    try {
      while (trainer.iteration < cfg.train.iterations && Date.now() - t0 < o.budgetMinutes * 60_000) {
        const m = await trainer.step();
        const figs: Record<string, number> = { reward: m.reward, em: m.em, tools: m.tool_calls, tokens: m.response_tokens };
        if (m["val/em"] !== undefined) figs["val em"] = m["val/em"];
        progress.update(m.iteration, figs);
      }
    } finally {
      progress.finish();
    }
    if (trainer.iteration < cfg.train.iterations) {
      io.out(`main: time budget reached after ${trainer.iteration} iterations`);
      await trainer.checkpoint(trainer.iteration);
    }
    const after = await evaluate();
    const minutes = (Date.now() - t0) / 60_000;
    const result: MainJobResult = { out: o.out, before, after, iterations: trainer.iteration, minutes, algorithm };
    writeFileSync(join(o.out, "eval.json"), JSON.stringify({ split: "test", rows: testRows.length, greedy: true, ...result }, null, 2) + "\n");
    return result;
  } finally {
    await trainer.close();
  }
}

export function reportLines(res: MainJobResult, taskName: string): string[] {
  const { before: b, after: a } = res;
  return [
    ...summaryTable([["base", b], [`after ${res.algorithm}`, a]], taskName),
    `held-out exact match: ${pct(b.em)} → ${pct(a.em)}`,
    `tool calls per episode: ${b.toolCalls.toFixed(2)} → ${a.toolCalls.toFixed(2)}`,
    `response length (tokens per episode): ${b.responseTokens.toFixed(1)} → ${a.responseTokens.toFixed(1)}`,
    `${res.iterations} iterations in ${res.minutes.toFixed(1)} min; run directory ${res.out}`,
  ];
}

const pct = (x: number) => `${(100 * x).toFixed(1)}%`;

export const mainJobCommand: Command = {
  name: "main",
  summary: "the main job: GRPO on multi-hop search from the committed base; held-out exact match before and after",
  usage: "agent-r1 main [--config RECIPE.yaml] [--base DIR] [--out RUN_DIR] [--force] [--budget-minutes M] " + BACKEND_USAGE + " [key.path=value ...]",
  async run(argv, io) {
    const { flags, positionals } = parseFlags("main", argv, { config: { type: "string" }, base: { type: "string" }, out: { type: "string" }, "budget-minutes": { type: "string" }, ...FORCE_FLAG, ...BACKEND_FLAG });
    const stray = positionals.find((p) => !p.includes("="));
    if (stray) throw new InputError(`main: unexpected argument '${stray}'`, "overrides look like key.path=value");
    const backend = parseBackendFlag("main", flags);
    const res = await runMainJob({
      recipe: (flags.config as string | undefined) ?? MAIN_JOB_DEFAULTS.recipe(),
      base: (flags.base as string | undefined) ?? MAIN_JOB_DEFAULTS.base(),
      out: (flags.out as string | undefined) ?? `runs/main-${new Date().toISOString().replace(/[:.]/g, "-")}`,
      overrides: [...positionals, ...(backend ? [`engine.backend=${backend}`] : [])],
      budgetMinutes: optionalNumber("main", flags, "budget-minutes") ?? MAIN_JOB_DEFAULTS.budgetMinutes,
      force: flags.force === true,
    }, io);
    for (const l of reportLines(res, "multihop")) io.out(l);
  },
};
