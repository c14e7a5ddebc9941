/**
 * Runs every trajectory of a batch at once: rows x n trajectories, each with a
 * fresh env. Tool calls are awaited without blocking the others, and the
 * engine's continuous batching merges the decode steps of whichever
 * trajectories are sampling; each turn sends the full context and the engine
 * reuses the cached prefix of the previous turn.
 *
 * A trajectory whose env throws is marked failed, left out of `trajectories`
 * and counted in the metrics; the others go on. An engine error rejects the
 * rollout (after every trajectory has settled).
 */
import type { Engine } from "../engine/types.js";
import type { Tokenizer } from "../model/tokenizer.js";
import { InputError } from "../util/errors.js";
import { Rng } from "../util/rng.js";
import { AgentLoop } from "./agent-loop.js";
import type { AgentFlow } from "./agent-flow.js";
import { chatSetup, type ChatSetup } from "./chat-setup.js";
import { CompactionFlow } from "./compaction-flow.js";
import type { CompactionOptions } from "./compaction-options.js";
import type { Env, EnvFactory } from "./env.js";
import { LOOP_DEFAULTS, type AgentLoopOptions } from "./loop-options.js";
import { rolloutMetrics, type RolloutMetrics } from "./rollout-metrics.js";
import { TrajectoryBuilder, type Trajectory } from "./trajectory.js";

export interface RolloutOptions<Row> extends AgentLoopOptions {
  /** Trajectories per row (a group). Default 1. */
  n?: number;
  /** Default: `engine.tokenizer` when the engine has one (a PolicyEngine does). */
  tokenizer?: Tokenizer;
  /** Default: chatSetup(tokenizer). maxTotalTokens defaults to min(4096, the model's max_position_embeddings). */
  chat?: ChatSetup;
  /** Default: an AgentLoop with these options, or a CompactionFlow with `compaction` (a flow given here keeps its own). */
  flow?: AgentFlow<Row>;
  /** Summarize and continue once the context passes `compaction.atTokens` (src/agent/compaction-flow.ts). */
  compaction?: CompactionOptions;
  /** Makes the rollout reproducible: trajectory i samples with seeds derived from (seed, i). */
  seed?: number;
  /** Trajectories in flight at most. Default: all. */
  concurrency?: number;
}

export interface RolloutResult {
  /** Finished trajectories, in row-major order (row 0's n samples, then row 1's ...). */
  trajectories: Trajectory[];
  failed: Trajectory[];
  metrics: RolloutMetrics;
}

function resolveChat<Row>(engine: Engine, opts: RolloutOptions<Row>): ChatSetup {
  if (opts.chat) return opts.chat;
  const tokenizer = opts.tokenizer ?? (engine as { tokenizer?: Tokenizer }).tokenizer;
  if (!tokenizer)
    throw new InputError(
      "rollout: the engine has no tokenizer",
      "pass rollout(..., { tokenizer }) or { chat: chatSetup(tokenizer) }",
    );
  return chatSetup(tokenizer);
}

/** The loop default, capped by the model's context length when the engine tells it. */
function defaultMaxTotal(engine: Engine): number {
  const max = (engine as { config?: { maxPositionEmbeddings?: number } }).config?.maxPositionEmbeddings;
  return Math.min(LOOP_DEFAULTS.maxTotalTokens, max ?? Infinity);
}

/** The loop the options describe: an AgentLoop, or a CompactionFlow when they ask for compaction. */
function defaultFlow<Row>(engine: Engine, opts: RolloutOptions<Row>): AgentFlow<Row> {
  const { compaction, ...rest } = opts;
  const loop = { ...rest, maxTotalTokens: opts.maxTotalTokens ?? defaultMaxTotal(engine) };
  const chat = resolveChat(engine, opts);
  return compaction
    ? new CompactionFlow<Row>(engine, chat, { ...loop, compaction })
    : new AgentLoop<Row>(engine, chat, loop);
}

/** Builds the env inside the trajectory's run, so a throwing factory fails only its own trajectory. */
async function runOne<Row>(
  flow: AgentFlow<Row>,
  makeEnv: EnvFactory<Row>,
  row: Row,
  i: number,
  meta: { rowIndex: number; sampleIndex: number; seed?: number },
): Promise<Trajectory> {
  const id = `r${meta.rowIndex}-s${meta.sampleIndex}`;
  let env: Env<Row>;
  try {
    env = makeEnv(row, i);
  } catch (err) {
    const e = err instanceof Error ? err : new Error(String(err));
    return new TrajectoryBuilder(id, meta.rowIndex, meta.sampleIndex).finish("failed", {
      error: { stage: "reset", name: e.name, message: `env factory: ${e.message}` },
    });
  }
  return flow.run(env, row, { id, ...meta });
}

export async function rollout<Row>(
  engine: Engine,
  makeEnv: EnvFactory<Row>,
  rows: Row[],
  opts: RolloutOptions<Row> = {},
): Promise<RolloutResult> {
  const n = opts.n ?? 1;
  if (!(Number.isInteger(n) && n > 0)) throw new InputError(`rollout: n must be a positive integer, got ${n}`);
  const limit = opts.concurrency ?? Infinity;
  if (!(limit >= 1)) throw new InputError(`rollout: concurrency must be at least 1, got ${limit}`);
  const flow = opts.flow ?? defaultFlow(engine, opts);
  const jobs = rows.flatMap((row, r) => Array.from({ length: n }, (_, s) => ({ row, rowIndex: r, sampleIndex: s })));
  const settled: PromiseSettledResult<Trajectory>[] = new Array(jobs.length);
  const t0 = performance.now();
  let next = 0;
  let broken = false; // after an engine error, start no new trajectories
  const worker = async () => {
    while (next < jobs.length && !broken) {
      const i = next++;
      const j = jobs[i];
      const seed = opts.seed === undefined ? undefined : new Rng(opts.seed, i).int(0x7fffffff);
      settled[i] = await runOne(flow, makeEnv, j.row, i, {
        rowIndex: j.rowIndex,
        sampleIndex: j.sampleIndex,
        seed,
      }).then(
        (value) => ({ status: "fulfilled", value }) as const,
        (reason) => {
          broken = true;
          return { status: "rejected", reason } as const;
        },
      );
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, jobs.length) }, worker));
  const wallMs = performance.now() - t0;
  const failure = settled.find((s): s is PromiseRejectedResult => s?.status === "rejected");
  if (failure) throw failure.reason;
  const all = settled.map((s) => (s as PromiseFulfilledResult<Trajectory>).value);
  return {
    trajectories: all.filter((t) => t.endReason !== "failed"),
    failed: all.filter((t) => t.endReason === "failed"),
    metrics: rolloutMetrics(all, wallMs),
  };
}
