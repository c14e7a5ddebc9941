/**
 * Rollouts of an agent the user already has: `agent(row, { baseURL, apiKey, model, signal })` is
 * run n times per row, concurrently, each time against its own episode URL on the recording
 * gateway; whatever client library it uses, its completions become the same step-level Trajectory
 * the built-in rollout produces (rowIndex x sampleIndex form the groups), with the reward the agent
 * returned on the last step. An agent that throws, runs past its timeout, returns a reward that is
 * not a finite number, or never calls the model fails only its own episode: it is counted, logged
 * and left out, and the rollout goes on. Whatever it throws (null, an object whose toString throws,
 * a revoked Proxy) is shown without running into it again.
 *
 * Each episode has its own key (`ctx.apiKey`): the gateway answers a request to one episode's URL
 * with another's key with a 401.
 *
 * An episode a limit ended (maxTurns, maxTotalTokens: the gateway refused the request) is kept as
 * truncated whatever the agent does next: with its reward if it returns one, else 0.
 *
 * An agent runs in this process: what it leaves unhandled (a rejected promise, an exception in a
 * callback) fails its own episode instead of ending the process (agent-guard.ts).
 */
import {
  agentScope,
  holdGuard,
  releaseGuard,
  safeLog,
  toStderr,
  type GuardHolder,
  type LiveEpisode,
} from "./agent-guard.js";
import type { EpisodeRecorder } from "./episode-recorder.js";
import { describeThrown } from "../util/describe-thrown.js";
import type { Engine } from "../engine/types.js";
import type { Tokenizer } from "../model/tokenizer.js";
import { chatSetup, type ChatSetup } from "../agent/chat-setup.js";
import { rolloutMetrics } from "../agent/rollout-metrics.js";
import { TrajectoryBuilder, type Trajectory } from "../agent/trajectory.js";
import type { RolloutResult } from "../agent/rollout.js";
import { LOOP_DEFAULTS } from "../agent/loop-options.js";
import { InputError } from "../util/errors.js";
import { Rng } from "../util/rng.js";
import { Gateway } from "./gateway.js";

export interface AgentContext {
  /** The episode's OpenAI-compatible base URL (`.../episodes/{id}/v1`): give it to the client library. */
  baseURL: string;
  /** The episode's own key: it opens this episode's URL and no other. */
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
  /** The recipe's sampling, used whatever an agent's request says unless `agentSampling` is "agent". */
  temperature?: number;
  topP?: number;
  maxTokensPerTurn?: number;
  maxTotalTokens?: number;
  /** "recipe" (default): the options above win over the agents' requests; "agent": the requests win. */
  agentSampling?: "recipe" | "agent";
  /**
   * Lines already said (once per run): what an agent asked for that the recipe overrode is logged
   * once per distinct line through `log`. A task keeps one set across its iterations.
   */
  said?: Set<string>;
  /**
   * Completions per episode at most (default 8, the built-in rollout's): the next request is refused
   * and the episode ends truncated (max_turns), kept. Ignored with a `gateway` of your own (its options hold).
   */
  maxTurns?: number;
  /** Episodes in flight at most. Default: all. */
  concurrency?: number;
  /** A gateway already started (its engine must be this engine); by default one is started and stopped here. */
  gateway?: Gateway;
  /** One line per failed episode, and per distinct rejection or exception an ended agent left unhandled (by default those go to stderr). */
  log?: (line: string) => void;
}

export interface AgentRolloutResult extends RolloutResult {
  /** Per trajectory (by id), the metrics its agent returned. */
  agentMetrics: Map<string, Record<string, number>>;
  /** Requests that started a new segment, and why (by trajectory id). */
  segmentReasons: Map<string, string[]>;
  /** Promise rejections (and callback exceptions) the agents left unhandled while this rollout ran: each failed its episode or was logged. */
  unhandledRejections: number;
}

/** A short key for why a request started a new segment (episode-recorder.ts's reasons), for metrics. */
export function segmentCode(reason: string): string {
  if (reason.startsWith("the tools changed")) return "tools_changed";
  if (reason.startsWith("the request has")) return "history_shortened";
  if (reason.startsWith("the assistant's answer")) return "answer_changed";
  if (reason.startsWith("an assistant message follows")) return "assistant_follows";
  if (/^message \d+/.test(reason)) return "history_changed";
  return "other";
}

/** A value shown in a message, in at most 200 characters; never throws. */
function show(v: unknown): string {
  if (typeof v === "number" || typeof v === "boolean" || typeof v === "bigint" || v === null || v === undefined)
    return String(v);
  let text: string | undefined;
  try {
    text = JSON.stringify(v);
  } catch {
    // a cycle, a BigInt inside, a getter that throws
  }
  text ??= describeThrown(v);
  return text.length > 200 ? `${text.slice(0, 200)}...` : text;
}

class BadOutcome extends Error {}

function outcome(v: unknown): { reward: number; metrics: Record<string, number> } {
  const o = typeof v === "number" ? { reward: v } : (v as { reward?: unknown; metrics?: unknown } | null);
  const reward = o?.reward;
  if (typeof reward !== "number" || !Number.isFinite(reward)) {
    // NaN and Infinity by name (JSON would show them as null).
    const what = typeof v === "number" || v === null || typeof v !== "object" ? show(v) : `{ reward: ${show(reward)} }`;
    throw new BadOutcome(`the agent returned ${what}, not a finite reward (a number, or { reward, metrics })`);
  }
  const metrics: Record<string, number> = {};
  for (const [k, x] of Object.entries((o as { metrics?: Record<string, unknown> }).metrics ?? {}))
    if (typeof x === "number" && Number.isFinite(x)) metrics[k] = x;
  return { reward, metrics };
}

/** Why an agent failed, from what it threw: an Error's message, or what else it threw. */
function agentFailure(e: unknown): string {
  return instanceOf(e, Error) ? describeThrown(e) : `the agent threw ${describeThrown(e)}`;
}

/** `e instanceof C`, false where asking throws (a revoked Proxy, a throwing getPrototypeOf trap). */
function instanceOf(e: unknown, C: abstract new (...args: never[]) => unknown): boolean {
  try {
    return e instanceof C;
  } catch {
    return false;
  }
}

interface Job<Row> {
  row: Row;
  rowIndex: number;
  sampleIndex: number;
}

/** What the agents' requests did to the gateway: completions, new segments by reason code, replays. */
interface Traffic {
  requests: number;
  segments: Record<string, number>;
  replays: number;
}

/** What the episodes of one rollout share. */
interface RolloutState<Row> {
  gateway: Gateway;
  agent: Agent<Row>;
  opts: AgentRolloutOptions;
  holder: GuardHolder;
  traffic: Traffic;
  /** Logs a line once per run. */
  note: (line: string) => void;
  timeoutMs: number;
}

interface EpisodeResult {
  trajectory: Trajectory;
  /** The metrics its agent returned (kept episodes only). */
  metrics?: Record<string, number>;
  /** Why requests started new segments, if any did. */
  segmentReasons?: string[];
}

type AgentResult =
  { result: { reward: number; metrics: Record<string, number> }; problem?: undefined } | { problem: string };

function positiveInt(v: number, name: string): number {
  if (!(Number.isInteger(v) && v > 0))
    throw new InputError(`agentRollout: ${name} must be a positive integer, got ${v}`);
  return v;
}

/** The rollout's own gateway on `engine`, with the recipe's limits and sampling. */
function ownGateway(engine: Engine, opts: AgentRolloutOptions, maxTurns: number): Promise<Gateway> {
  const tokenizer = opts.tokenizer ?? (engine as { tokenizer?: Tokenizer }).tokenizer;
  const chat = opts.chat ?? (tokenizer ? chatSetup(tokenizer) : undefined);
  if (!chat) throw new InputError("agentRollout: the engine has no tokenizer", "pass { tokenizer } or { chat }");
  const window = (engine as { config?: { maxPositionEmbeddings?: number } }).config?.maxPositionEmbeddings ?? 4096;
  return new Gateway({
    chat,
    engine,
    maxTokensPerTurn: opts.maxTokensPerTurn ?? 256,
    maxTotalTokens: opts.maxTotalTokens ?? Math.min(4096, window),
    maxTurns,
    temperature: opts.temperature ?? 1,
    topP: opts.topP ?? 1,
    agentSampling: opts.agentSampling ?? "recipe",
    log: opts.log,
  }).start();
}

/** Runs the agent in the episode's own async context until it returns, throws or is stopped. */
async function runAgent<Row>(live: LiveEpisode, agent: Agent<Row>, row: Row, ctx: AgentContext): Promise<AgentResult> {
  const abort = live.abort;
  const stopped = new Promise<never>((_, reject) =>
    abort.signal.addEventListener("abort", () => reject(abort.signal.reason), { once: true }),
  );
  // A rejection its code leaves is pinned on the episode; a synchronous throw is a rejection.
  const run = agentScope.run(live, () => Promise.resolve().then(() => agent(row, ctx)));
  let got: AgentResult;
  try {
    got = { result: outcome(await Promise.race([run, stopped])) };
  } catch (e) {
    got = { problem: instanceOf(e, BadOutcome) ? (e as BadOutcome).message : agentFailure(e) };
  }
  // A rejection the agent left just before returning is reported once the current microtasks have run.
  await new Promise((r) => setImmediate(r));
  live.ended = true;
  return live.stray === undefined ? got : { problem: live.stray };
}

/** Adds an episode's requests to the rollout's traffic, and says once what the recipe overrode. */
function tally(rec: EpisodeRecorder, traffic: Traffic, note: (line: string) => void): void {
  traffic.requests += rec.sampled;
  traffic.replays += rec.replays;
  for (const r of rec.segmentReasons) traffic.segments[segmentCode(r)] = (traffic.segments[segmentCode(r)] ?? 0) + 1;
  for (const asked of rec.samplingAsked)
    note(
      `an agent asked for ${asked} (the recipe's sampling wins; set rollout.agentSampling: agent to let the request's win)`,
    );
}

/** The episode's trajectory from what its agent did: kept, or failed with the reason. */
function settle(rec: EpisodeRecorder, got: AgentResult, failed: (message: string) => Trajectory): EpisodeResult {
  // Another conversation reached this episode (a shared client): it fails whole, never mixed.
  if (rec.mixed !== undefined) {
    rec.finish(0);
    return { trajectory: failed(rec.mixed) };
  }
  // A limit ended the episode: it is kept, whatever the agent did after it was refused.
  if (got.problem !== undefined && !rec.truncated) {
    rec.finish(0);
    return { trajectory: failed(got.problem) };
  }
  const t = rec.finish(got.problem === undefined ? got.result.reward : 0);
  if (!t) return { trajectory: failed(rec.refusal ?? "the agent never called the model") };
  return {
    trajectory: t,
    metrics: got.problem === undefined ? got.result.metrics : {},
    segmentReasons: rec.segmentReasons.length ? [...rec.segmentReasons] : undefined,
  };
}

/** One episode: its gateway URL and key, the agent run against them under a timeout, and its trajectory. */
async function runEpisode<Row>(st: RolloutState<Row>, job: Job<Row>, i: number): Promise<EpisodeResult> {
  const { opts, gateway } = st;
  const seed = opts.seed === undefined ? undefined : new Rng(opts.seed, i).int(0x7fffffff);
  const ep = gateway.open({ rowIndex: job.rowIndex, sampleIndex: job.sampleIndex, row: job.row, seed });
  const live: LiveEpisode = {
    id: ep.id,
    where: `agent episode ${ep.id} (row ${job.rowIndex + 1}, sample ${job.sampleIndex + 1})`,
    holder: st.holder,
    ended: false,
    abort: new AbortController(),
    route: { baseURL: ep.baseURL, apiKey: ep.apiKey },
  };
  const timer = setTimeout(
    () => live.abort.abort(new Error(`the agent ran past its timeout of ${st.timeoutMs} ms`)),
    st.timeoutMs,
  );
  const failed = (message: string) => {
    safeLog(opts.log, `${live.where} failed: ${message}`);
    return new TrajectoryBuilder(ep.id, job.rowIndex, job.sampleIndex).finish("failed", {
      error: { stage: "step", name: "AgentError", message },
    });
  };
  try {
    const ctx: AgentContext = {
      baseURL: ep.baseURL,
      apiKey: ep.apiKey,
      model: gateway.model,
      signal: live.abort.signal,
      rowIndex: job.rowIndex,
      sampleIndex: job.sampleIndex,
    };
    const got = await runAgent(live, st.agent, job.row, ctx);
    tally(ep.recorder, st.traffic, st.note);
    return settle(ep.recorder, got, failed);
  } catch (e) {
    return { trajectory: failed(`recording the episode failed: ${describeThrown(e)}`) };
  } finally {
    live.ended = true;
    clearTimeout(timer);
    live.abort.abort(); // a client still waiting on the gateway stops
    gateway.close(ep.id);
  }
}

/** The line to say when many requests rewrote their conversation (each segment trains alone). */
function rewriteNote(traffic: Traffic): string | undefined {
  const rewrites = Object.values(traffic.segments).reduce((a, b) => a + b, 0);
  if (traffic.requests < 20 || rewrites <= 0.05 * traffic.requests) return undefined;
  const pct = ((100 * rewrites) / traffic.requests).toFixed(0);
  const why = Object.entries(traffic.segments)
    .map(([k, v]) => `${k} ${v}`)
    .join(", ");
  return (
    `${rewrites} of ${traffic.requests} agent requests (${pct} %) rewrote the conversation and started a new segment (${why}): ` +
    "each segment trains as its own sequence; an agent that sends back its history as it got it trains on whole episodes"
  );
}

export async function agentRollout<Row>(
  engine: Engine,
  agent: Agent<Row>,
  rows: Row[],
  opts: AgentRolloutOptions = {},
): Promise<AgentRolloutResult> {
  const n = positiveInt(opts.n ?? 1, "n");
  if (typeof agent !== "function") throw new InputError("agentRollout: agent must be a function (row, ctx) => reward");
  const maxTurns = positiveInt(opts.maxTurns ?? LOOP_DEFAULTS.maxTurns, "maxTurns");
  const gateway = opts.gateway ?? (await ownGateway(engine, opts, maxTurns));
  const said = opts.said ?? new Set<string>();
  const st: RolloutState<Row> = {
    gateway,
    agent,
    opts,
    holder: { log: opts.log ?? toStderr, unhandled: 0 },
    traffic: { requests: 0, segments: {}, replays: 0 },
    note: (line) => {
      if (said.has(line)) return;
      said.add(line);
      (opts.log ?? toStderr)(line);
    },
    timeoutMs: opts.timeoutMs ?? 300_000,
  };
  const jobs = rows.flatMap((row, r) => Array.from({ length: n }, (_, s) => ({ row, rowIndex: r, sampleIndex: s })));
  const done: EpisodeResult[] = new Array(jobs.length);
  const t0 = performance.now();
  holdGuard(st.holder);
  try {
    let next = 0;
    const limit = Math.min(opts.concurrency ?? jobs.length, jobs.length);
    await Promise.all(
      Array.from({ length: limit }, async () => {
        while (next < jobs.length) {
          const i = next++;
          done[i] = await runEpisode(st, jobs[i], i);
        }
      }),
    );
  } finally {
    try {
      if (!opts.gateway) await gateway.stop();
    } finally {
      releaseGuard(st.holder);
    }
  }
  const line = rewriteNote(st.traffic);
  if (line) st.note(line);
  const all = done.map((d) => d.trajectory);
  const agentMetrics = new Map<string, Record<string, number>>();
  const segmentReasons = new Map<string, string[]>();
  for (const d of done) {
    if (d.metrics) agentMetrics.set(d.trajectory.id, d.metrics);
    if (d.segmentReasons) segmentReasons.set(d.trajectory.id, d.segmentReasons);
  }
  return {
    trajectories: all.filter((t) => t.endReason !== "failed"),
    failed: all.filter((t) => t.endReason === "failed"),
    metrics: { ...rolloutMetrics(all, performance.now() - t0), gateway: st.traffic },
    agentMetrics,
    segmentReasons,
    unhandledRejections: st.holder.unhandled,
  };
}
