/**
 * `agent-r1 main`: the main job (src/train/main-job.ts) with the multi-hop recipe and the
 * committed base checkpoint (assets/base/multihop, made by `agent-r1 pretrain`), a progress
 * bar, and exact match, tool calls per episode and response length before and after.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { loadTask } from "../../tasks/index.js";
import { loadConfig } from "../../train/load-config.js";
import { pct, runMainJob, type MainJobOptions, type MainJobResult } from "../../train/main-job.js";
import type { EpisodeSummary } from "../../train/evaluate.js";
import { InputError } from "../../util/errors.js";
import { optionalNumber, parseFlags, usageError, type FlagSpec } from "../args.js";
import type { Command, CommandIO } from "../command.js";
import { enginesFor } from "../engines.js";
import { Progress } from "../progress.js";
import { summaryTable } from "./eval.js";
import { BACKEND_FLAG, announceBackend, parseBackendFlag } from "./backend-flag.js";
import { forceFlag } from "./force-flag.js";
import { packageRoot } from "../../util/package-root.js";

export const MAIN_JOB_DEFAULTS = {
  recipe: () => join(packageRoot(), "recipes", "multihop-grpo.yaml"),
  base: () => join(packageRoot(), "assets", "base", "multihop"),
  budgetMinutes: 10,
};

export interface MainJobCommandOptions {
  recipe: string;
  base: string;
  out: string;
  /** key.path=value overrides of the recipe. */
  overrides?: string[];
  budgetMinutes: number;
  force?: boolean;
  /** Progress bar stream; default stderr. */
  stream?: NodeJS.WriteStream;
  /** Splits evaluated besides test (runMainJob's `alsoEvaluate`). */
  alsoEvaluate?: MainJobOptions["alsoEvaluate"];
}

/** The main job from a recipe file: checks the inputs, builds the engines the recipe names, shows progress. */
export async function mainJob(o: MainJobCommandOptions, io: CommandIO): Promise<MainJobResult> {
  for (const [what, path] of [
    ["recipe", o.recipe],
    ["base checkpoint", join(o.base, "config.json")],
  ]) {
    if (!existsSync(path))
      throw new InputError(
        `main: ${what} not found: ${path}`,
        what === "recipe"
          ? "pass --config RECIPE.yaml"
          : "make one with 'agent-r1 pretrain --task TASK --out DIR' (assets/base/multihop is the main job's), or pass --base DIR",
      );
  }
  const cfg = loadConfig(o.recipe, [`model.path=${o.base}`, ...(o.overrides ?? [])]);
  const task = await loadTask(cfg.task);
  const progress = new Progress({ label: cfg.algorithm.estimator, total: cfg.train.iterations, stream: o.stream });
  try {
    return await runMainJob(cfg, task, {
      base: o.base,
      out: o.out,
      engines: enginesFor(cfg.engine, (line) => io.err(line), { runDir: o.out }),
      budgetMinutes: o.budgetMinutes,
      force: o.force,
      alsoEvaluate: o.alsoEvaluate,
      say: (line) => {
        progress.finish();
        if (cfg.engine.kind === "local") announceBackend(cfg.engine.backend, io); // the engines have loaded by the first line
        io.out(line);
      },
      log: (line) => io.err(line),
      onIteration: (m) => {
        const figs: Record<string, number> = {
          reward: m.reward,
          em: m.em,
          tools: m.tool_calls,
          tokens: m.response_tokens,
        };
        if (m["val/em"] !== undefined) figs["val em"] = m["val/em"];
        progress.update(m.iteration, figs);
      },
    });
  } finally {
    progress.finish();
  }
}

export function reportLines(res: MainJobResult, taskName: string): string[] {
  const { before: b, after: a } = res;
  return [
    ...summaryTable(
      [
        ["base", b],
        [`after ${res.algorithm}`, a],
        ...(res.final !== a ? [[`final (iteration ${res.iterations})`, res.final] as [string, EpisodeSummary]] : []),
      ],
      taskName,
    ),
    `held-out exact match: ${pct(b.em)} → ${pct(a.em)}` +
      (res.best.valEm !== undefined
        ? ` (the best policy on validation: iteration ${res.best.iteration}, ${pct(res.best.valEm)}; in ${res.out}/best)`
        : ""),
    `tool calls per episode: ${b.toolCalls.toFixed(2)} → ${a.toolCalls.toFixed(2)}`,
    `response length (tokens per episode): ${b.responseTokens.toFixed(1)} → ${a.responseTokens.toFixed(1)}`,
    `${res.iterations} iterations in ${res.minutes.toFixed(1)} min; run directory ${res.out}`,
  ];
}

const FLAGS: FlagSpec = {
  config: { type: "string", value: "RECIPE.yaml", description: "the recipe", fallback: "recipes/multihop-grpo.yaml" },
  base: {
    type: "string",
    value: "DIR",
    description: "the base model RL starts from",
    fallback: "assets/base/multihop",
  },
  out: {
    type: "string",
    value: "RUN_DIR",
    description: "the run directory: new or empty",
    fallback: "runs/main-TIMESTAMP",
  },
  "budget-minutes": {
    type: "string",
    value: "M",
    description: "stop training after M minutes, then evaluate",
    fallback: MAIN_JOB_DEFAULTS.budgetMinutes,
  },
  ...forceFlag("start a new run over a non-empty --out"),
  ...BACKEND_FLAG,
};

export const mainJobCommand: Command = {
  name: "main",
  summary: "the main job: GRPO on multi-hop search from the committed base; held-out exact match before and after",
  usage: "agent-r1 main [flags] [key.path=value ...]  (overrides of the recipe)",
  flags: FLAGS,
  async run(argv, io) {
    const { flags, positionals } = parseFlags("main", argv, FLAGS);
    const stray = positionals.find((p) => !p.includes("="));
    if (stray) throw usageError("main", `unexpected argument '${stray}'`, "overrides look like key.path=value");
    const backend = parseBackendFlag("main", flags);
    const budgetMinutes = optionalNumber("main", flags, "budget-minutes") ?? MAIN_JOB_DEFAULTS.budgetMinutes;
    if (!(budgetMinutes >= 0)) throw usageError("main", `--budget-minutes must be >= 0, got ${budgetMinutes}`);
    const res = await mainJob(
      {
        recipe: (flags.config as string | undefined) ?? MAIN_JOB_DEFAULTS.recipe(),
        base: (flags.base as string | undefined) ?? MAIN_JOB_DEFAULTS.base(),
        out: (flags.out as string | undefined) ?? `runs/main-${new Date().toISOString().replace(/[:.]/g, "-")}`,
        overrides: [...positionals, ...(backend ? [`engine.backend=${backend}`] : [])],
        budgetMinutes,
        force: flags.force === true,
      },
      io,
    );
    for (const l of reportLines(res, "multihop")) io.out(l);
  },
};
