/**
 * Rollouts of an agent the user already has: `agent(row, { baseURL, apiKey, model, signal })` is
 * run n times per row, concurrently, each time against its own episode URL on the recording
 * gateway; whatever client library it uses, its completions become the same step-level Trajectory
 * the built-in rollout produces (rowIndex x sampleIndex form the groups), with the reward the agent
 * returned on the last step. An agent that throws, runs past its timeout, returns a reward that is
 * not a finite number, or never calls the model fails only its own episode: it is counted, logged
 * and left out, and the rollout goes on.
 */
import type { Engine } from "../engine/types.js";
import type { Tokenizer } from "../model/tokenizer.js";
import { chatSetup, type ChatSetup } from "../agent/chat-setup.js";
import { rolloutMetrics } from "../agent/rollout-metrics.js";
import { TrajectoryBuilder, type Trajectory } from "../agent/trajectory.js";
import type { RolloutResult } from "../agent/rollout.js";
import { InputError } from "../util/errors.js";
import { Rng } from "../util/rng.js";
import { Gateway } from "./gateway.js";

export interface AgentContext {
  /** The episode's OpenAI-compatible base URL (`.../episodes/{id}/v1`): give it to the client library. */
  baseURL: string;
  apiKey: string;
  /** The model name to ask for. */
  model: string;
  /** Aborts when the episode runs past its timeout. */
  signal: AbortSignal;
  rowIndex: number;
  sampleIndex: number;
}

/** What an agent returns: its reward, or the reward with metrics (numbers) to log beside it. */
export type AgentOutcome = number | { reward: number; metrics?: Record<string, number> };

export type Agent<Row> = (row: Row, ctx: AgentContext) => Promise<AgentOutcome>;

export interface AgentRolloutOptions {
  n?: number;
  /** Default: the engine's tokenizer (a PolicyEngine has one). */
  tokenizer?: Tokenizer;
  chat?: ChatSetup;
  /** Per episode: an agent still running after this is aborted and its episode failed. Default 5 min. */
  timeoutMs?: number;
  seed?: number;
  temperature?: number;
  maxTokensPerTurn?: number;
  maxTotalTokens?: number;
  /** Episodes in flight at most. Default: all. */
  concurrency?: number;
  /** A gateway already started (its engine must be this engine); by default one is started and stopped here. */
  gateway?: Gateway;
  /** One line per failed episode. */
  log?: (line: string) => void;
}

export interface AgentRolloutResult extends RolloutResult {
  /** Per trajectory (by id), the metrics its agent returned. */
  agentMetrics: Map<string, Record<string, number>>;
  /** Requests that started a new segment, and why (by trajectory id). */
  segmentReasons: Map<string, string[]>;
}

function outcome(v: unknown): { reward: number; metrics: Record<string, number> } {
  const o = typeof v === "number" ? { reward: v } : (v as { reward?: unknown; metrics?: unknown } | null);
  const reward = o?.reward;
  if (typeof reward !== "number" || !Number.isFinite(reward))
    throw new Error(`the agent returned ${JSON.stringify(v)}, not a finite reward (a number, or { reward, metrics })`);
  const metrics: Record<string, number> = {};
  for (const [k, x] of Object.entries((o as { metrics?: Record<string, unknown> }).metrics ?? {}))
    if (typeof x === "number" && Number.isFinite(x)) metrics[k] = x;
  return { reward, metrics };
}

export async function agentRollout<Row>(
  engine: Engine,
  agent: Agent<Row>,
  rows: Row[],
  opts: AgentRolloutOptions = {},
): Promise<AgentRolloutResult> {
  const n = opts.n ?? 1;
  if (!(Number.isInteger(n) && n > 0)) throw new InputError(`agentRollout: n must be a positive integer, got ${n}`);
  if (typeof agent !== "function") throw new InputError("agentRollout: agent must be a function (row, ctx) => reward");
  const tokenizer = opts.tokenizer ?? (engine as { tokenizer?: Tokenizer }).tokenizer;
  const chat = opts.chat ?? (tokenizer ? chatSetup(tokenizer) : undefined);
  if (!chat) throw new InputError("agentRollout: the engine has no tokenizer", "pass { tokenizer } or { chat }");
  const window = (engine as { config?: { maxPositionEmbeddings?: number } }).config?.maxPositionEmbeddings ?? 4096;
  const own = !opts.gateway;
  const gateway =
    opts.gateway ??
    (await new Gateway({
      chat,
      engine,
      maxTokensPerTurn: opts.maxTokensPerTurn ?? 256,
      maxTotalTokens: opts.maxTotalTokens ?? Math.min(4096, window),
      temperature: opts.temperature ?? 1,
      log: opts.log,
    }).start());
  const timeoutMs = opts.timeoutMs ?? 300_000;
  const jobs = rows.flatMap((row, r) => Array.from({ length: n }, (_, s) => ({ row, rowIndex: r, sampleIndex: s })));
  const all: Trajectory[] = new Array(jobs.length);
  const agentMetrics = new Map<string, Record<string, number>>();
  const segmentReasons = new Map<string, string[]>();
  const t0 = performance.now();

  const runOne = async (i: number) => {
    const job = jobs[i];
    const seed = opts.seed === undefined ? undefined : new Rng(opts.seed, i).int(0x7fffffff);
    const ep = gateway.open({ rowIndex: job.rowIndex, sampleIndex: job.sampleIndex, seed });
    const abort = new AbortController();
    const timer = setTimeout(
      () => abort.abort(new Error(`the agent ran past its timeout of ${timeoutMs} ms`)),
      timeoutMs,
    );
    const failed = (message: string) => {
      opts.log?.(`agent episode ${ep.id} (row ${job.rowIndex + 1}, sample ${job.sampleIndex + 1}) failed: ${message}`);
      return new TrajectoryBuilder(ep.id, job.rowIndex, job.sampleIndex).finish("failed", {
        error: { stage: "step", name: "AgentError", message },
      });
    };
    try {
      const run = agent(job.row, {
        baseURL: ep.baseURL,
        apiKey: gateway.apiKey,
        model: gateway.model,
        signal: abort.signal,
        rowIndex: job.rowIndex,
        sampleIndex: job.sampleIndex,
      });
      const raw = await Promise.race([
        run,
        new Promise<never>((_, reject) =>
          abort.signal.addEventListener("abort", () => reject(abort.signal.reason), { once: true }),
        ),
      ]);
      const { reward, metrics } = outcome(raw);
      const t = ep.recorder.finish(reward);
      all[i] = t ?? failed("the agent never called the model");
      if (t) {
        agentMetrics.set(t.id, metrics);
        if (ep.recorder.segmentReasons.length) segmentReasons.set(t.id, [...ep.recorder.segmentReasons]);
      }
    } catch (e) {
      ep.recorder.finish(0);
      all[i] = failed(e instanceof Error ? e.message.split("\n")[0] : String(e));
    } finally {
      clearTimeout(timer);
      abort.abort(); // a client still waiting on the gateway stops
      gateway.close(ep.id);
    }
  };

  try {
    let next = 0;
    const limit = Math.min(opts.concurrency ?? jobs.length, jobs.length);
    await Promise.all(
      Array.from({ length: limit }, async () => {
        while (next < jobs.length) await runOne(next++);
      }),
    );
  } finally {
    if (own) await gateway.stop();
  }
  return {
    trajectories: all.filter((t) => t.endReason !== "failed"),
    failed: all.filter((t) => t.endReason === "failed"),
    metrics: rolloutMetrics(all, performance.now() - t0),
    agentMetrics,
    segmentReasons,
  };
}
