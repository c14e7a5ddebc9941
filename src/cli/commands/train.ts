import { existsSync, statSync } from "node:fs";
import { join } from "node:path";
import { train } from "../../train/run.js";
import { parseFlags, usageError, type FlagSpec } from "../args.js";
import { Progress } from "../progress.js";
import { InputError } from "../../util/errors.js";
import type { Command } from "../command.js";
import { BACKEND_FLAG, announceBackend, parseBackendFlag } from "./backend-flag.js";
import { forceFlag } from "./force-flag.js";

const FLAGS: FlagSpec = {
  config: { type: "string", value: "RECIPE.yaml", description: "the recipe; without one, the built-in defaults" },
  out: {
    type: "string",
    value: "RUN_DIR",
    description: "the run directory: new or empty",
    fallback: "runs/run-TIMESTAMP",
  },
  resume: {
    type: "string",
    value: "RUN_DIR",
    description: "continue this run from its newest checkpoint that verifies (its config.yaml unless --config)",
  },
  "skip-bad-rows": {
    type: "boolean",
    default: false,
    description: "skip and count data.train / data.val rows that fail the schema instead of stopping at the first",
  },
  ...forceFlag("start a new run over a non-empty --out (not with --resume)"),
  ...BACKEND_FLAG,
};

export const trainCommand: Command = {
  name: "train",
  summary: "train an agent with RL from a YAML recipe (resumable)",
  usage:
    "agent-r1 train [flags] [key.path=value ...]  (overrides of the recipe; data.train=FILE reads rows from .jsonl or .parquet)",
  flags: FLAGS,
  async run(argv, io) {
    const { flags, positionals } = parseFlags("train", argv, FLAGS);
    const stray = positionals.find((p) => !p.includes("="));
    if (stray) throw usageError("train", `unexpected argument '${stray}'`, "overrides look like key.path=value");
    const backend = parseBackendFlag("train", flags);
    const resume = flags.resume as string | undefined;
    if (resume && flags.force)
      throw usageError("train", "give --resume (continue the run) or --force (start over), not both");
    const out =
      resume ?? (flags.out as string | undefined) ?? `runs/run-${new Date().toISOString().replace(/[:.]/g, "-")}`;
    let recipe = flags.config as string | undefined;
    if (resume) {
      if (!existsSync(resume)) throw new InputError(`train: --resume ${resume}: run directory not found`);
      if (!statSync(resume).isDirectory())
        throw new InputError(`train: --resume ${resume} is a file, not a run directory`);
      recipe ??= join(resume, "config.yaml");
    }
    const overrides = positionals.filter((p) => p.includes("="));
    if (flags["skip-bad-rows"]) overrides.push("data.skipBadRows=true");
    if (backend) overrides.push(`engine.backend=${backend}`);
    let progress: Progress | undefined;
    try {
      await train(recipe, {
        out,
        overrides,
        resume: Boolean(resume),
        force: flags.force === true,
        log: (l) => io.err(l),
        onStart({ config: cfg, task, iteration }) {
          if (cfg.engine.kind === "local") announceBackend(cfg.engine.backend, io);
          io.out(
            `training ${cfg.algorithm.estimator} on '${task.name}' for ${cfg.train.iterations} iterations → ${out}${resume ? ` (resuming after iteration ${iteration})` : ""}`,
          );
          progress = new Progress({ label: "train", total: cfg.train.iterations });
        },
        onIteration(m) {
          const figs: Record<string, number> = { reward: m.reward, em: m.em, tools: m.tool_calls };
          if (m["val/em"] !== undefined) figs["val em"] = m["val/em"];
          progress?.update(m.iteration, figs);
        },
      });
    } finally {
      progress?.finish();
    }
    io.out(`done: ${join(out, "metrics.jsonl")}, checkpoints in ${join(out, "checkpoints")}`);
  },
};
