/**
 * A task from a module of the user's: the agent they already have, trained as it is (a recipe's
 * `task.module: ./my-agent.ts`). The module exports
 *   agent: (row, { baseURL, apiKey, model, signal }) => Promise<reward | { reward, metrics }>
 * and its rows, as one of
 *   rows: Row[] | { train: Row[]; val?: Row[]; test?: Row[] }
 *   data: "rows.jsonl" | { train, val?, test? }   (Agent-R1 rows in JSONL or parquet, relative to the module)
 * Each episode gets its own baseURL and apiKey (a key opens only its episode). A relative
 * `task.module` in a recipe is resolved against the recipe's directory when it is loaded
 * (src/train/load-config.ts); here, against the current directory (`eval --task`).
 * Episodes are played through the recording gateway (src/gateway/agent-rollout.ts) under the recipe's
 * rollout limits (maxTurns, maxTokensPerTurn, maxTotalTokens); an agent's
 * `metrics.em` and `metrics.f1`, when it returns them, are logged as exact match and F1. A `.ts`
 * module is loaded with tsx when it is installed (`npm i -D tsx`); `.js` and `.mjs` load as they are.
 */
import { existsSync } from "node:fs";
import { dirname, extname, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import type { Trajectory } from "../agent/trajectory.js";
import { agentRollout, type Agent } from "../gateway/agent-rollout.js";
import { readTaskRowsFile } from "../data/task-rows-file.js";
import { InputError } from "../util/errors.js";
import type { Split, Task, TaskRow } from "./types.js";

interface AgentModule {
  agent?: unknown;
  rows?: unknown;
  data?: unknown;
}

async function importModule(path: string): Promise<AgentModule> {
  const url = pathToFileURL(path).href;
  if (extname(path) === ".ts" || extname(path) === ".mts") {
    let tsImport: (specifier: string, parent: string) => Promise<unknown>;
    try {
      ({ tsImport } = (await import("tsx/esm/api")) as { tsImport: typeof tsImport });
    } catch {
      throw new InputError(
        `task.module ${path}: a TypeScript module needs tsx to load`,
        "npm install --save-dev tsx, or point task.module at the compiled .js",
      );
    }
    return (await tsImport(url, import.meta.url)) as AgentModule;
  }
  return (await import(url)) as AgentModule;
}

const SPLITS: Split[] = ["train", "val", "test"];

async function splitRows(mod: AgentModule, where: string, dir: string): Promise<Record<Split, TaskRow[]>> {
  const out: Record<Split, TaskRow[]> = { train: [], val: [], test: [] };
  const asRows = (x: unknown, what: string): TaskRow[] => {
    if (!Array.isArray(x) || !x.every((r) => r !== null && typeof r === "object"))
      throw new InputError(`${where}: ${what} must be a list of row objects`);
    return x as TaskRow[];
  };
  if (mod.rows !== undefined) {
    if (Array.isArray(mod.rows)) out.train = asRows(mod.rows, "rows");
    else if (mod.rows && typeof mod.rows === "object")
      for (const s of SPLITS) {
        const r = (mod.rows as Record<string, unknown>)[s];
        if (r !== undefined) out[s] = asRows(r, `rows.${s}`);
      }
    else throw new InputError(`${where}: rows must be a list, or { train, val?, test? }`);
  } else if (mod.data !== undefined) {
    const files: Partial<Record<Split, unknown>> =
      typeof mod.data === "string" ? { train: mod.data } : (mod.data as object);
    for (const s of SPLITS) {
      const f = files[s];
      if (f === undefined) continue;
      if (typeof f !== "string") throw new InputError(`${where}: data.${s} must be a file path`);
      out[s] = (await readTaskRowsFile(resolve(dir, f))).rows;
    }
  } else
    throw new InputError(`${where}: export rows (a list, or { train, val, test }) or data (a JSONL or parquet path)`);
  if (out.train.length === 0) throw new InputError(`${where}: no training rows`);
  return out;
}

/** The metrics the agent returned, kept on the trajectory's last step. */
const agentMetricsOf = (t: Trajectory) =>
  ((t.steps[t.steps.length - 1]?.info as { agent?: Record<string, number> }).agent ?? {}) as Record<string, number>;

export async function loadAgentTask(modulePath: string, options: Record<string, unknown> = {}): Promise<Task> {
  const path = resolve(modulePath);
  const where = `task.module ${modulePath}`;
  if (!existsSync(path)) throw new InputError(`${where}: file not found`);
  let mod: AgentModule;
  try {
    mod = await importModule(path);
  } catch (e) {
    if (e instanceof InputError) throw e;
    throw new InputError(`${where}: the module failed to load: ${(e as Error).message.split("\n")[0]}`);
  }
  if (typeof mod.agent !== "function") throw new InputError(`${where}: export agent, a function (row, ctx) => reward`);
  const agent = mod.agent as Agent<TaskRow>;
  const rows = await splitRows(mod, where, dirname(path));
  const timeoutMs = typeof options.timeoutMs === "number" ? options.timeoutMs : undefined;
  return {
    name: `module:${modulePath}`,
    rows: (split) => rows[split],
    makeEnv() {
      throw new InputError(`${where}: an agent task plays through the gateway and has no env`);
    },
    async play(engine, list, o) {
      const res = await agentRollout(engine, agent, list, {
        n: o.n,
        seed: o.seed,
        temperature: o.temperature,
        maxTurns: o.maxTurns,
        maxTokensPerTurn: o.maxTokensPerTurn,
        maxTotalTokens: o.maxTotalTokens,
        ...(timeoutMs !== undefined ? { timeoutMs } : {}),
        log: o.log,
      });
      for (const t of res.trajectories) {
        const last = t.steps[t.steps.length - 1];
        last.info = { ...last.info, agent: res.agentMetrics.get(t.id) ?? {} };
      }
      return res;
    },
    score(t) {
      const m = agentMetricsOf(t);
      return { reward: t.reward, em: m.em ?? 0, f1: m.f1 ?? 0, formatOk: 1 };
    },
    demonstrations() {
      throw new InputError(`${where}: an agent task has no scripted demonstrations (pretrain needs a built-in task)`);
    },
    corpus: () => [],
  };
}
