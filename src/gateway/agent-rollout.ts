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
 * The agent runs in this process, so a promise it leaves rejected and unhandled, or an exception it
 * throws in a timer or an event callback, would end the process through Node's default handlers.
 * While agent rollouts run (and for a short grace after the last one ends, for a request an agent
 * left behind that fails once the gateway is gone) process-level listeners take them instead. Each
 * agent runs in its own async context, so what its code left behind is pinned on its episode, which
 * fails (the message says what was left); what comes from an episode that has ended is logged once
 * per distinct message and counted (`unhandledRejections`), as is a rejection from nowhere known; an
 * exception from nowhere known is Node's to report, and ends the process as it always did. With no
 * agent rollout running the listeners are gone, and Node's own behaviour is back.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import { installEpisodeFetch, type EpisodeRoute } from "./episode-fetch.js";
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

/**
 * What a thrown value says, on one line of at most 1,000 characters. Never throws: it tries the
 * value's own text, then its `message`, then its tag, and gives up with "[an unprintable value]".
 */
export function describeThrown(e: unknown): string {
  const ways = [
    () => (e instanceof Error ? e.message : String(e)),
    () => {
      const m = (e as { message?: unknown }).message;
      if (typeof m !== "string") throw new TypeError("no message");
      return m;
    },
    () => Object.prototype.toString.call(e),
  ];
  for (const way of ways) {
    try {
      const text = way();
      if (typeof text === "string") {
        const line = text.split("\n")[0];
        return line.length > 1000 ? `${line.slice(0, 1000)}...` : line;
      }
    } catch {
      // the next way
    }
  }
  return "[an unprintable value]";
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

/** A rollout holding the process-level guard: where its lines go and the rejections it was told of. */
interface GuardHolder {
  log: (line: string) => void;
  unhandled: number;
}

/** One running agent, as the async context its code runs in carries it. */
interface LiveEpisode {
  id: string;
  where: string;
  holder: GuardHolder;
  ended: boolean;
  /** Why it fails: the first rejection or exception its code left unhandled, if any. */
  stray?: string;
  abort: AbortController;
  /** Where its agent's requests go, whatever client sends them (episode-fetch.ts). */
  route: EpisodeRoute;
}

/** After the last agent rollout ends, how long its agents' leftover promises are still taken care of. */
const GUARD_GRACE_MS = 2_000;

function toStderr(line: string): void {
  process.stderr.write(line + "\n");
}

const agentScope = new AsyncLocalStorage<LiveEpisode>();
installEpisodeFetch(() => agentScope.getStore()?.route);
const guard = {
  holders: new Set<GuardHolder>(),
  installed: false,
  timer: undefined as NodeJS.Timeout | undefined,
  /** Messages already logged (a few hundred at most). */
  seen: new Set<string>(),
  lastLog: toStderr as (line: string) => void,
};

/** What an agent left behind, pinned on its episode while it runs (it fails), else logged once per message. */
function leftBehind(what: string, text: string, ep: LiveEpisode | undefined): void {
  if (ep && !ep.ended) {
    ep.holder.unhandled++;
    if (ep.stray === undefined) {
      ep.stray = `the agent left ${what}: ${text}`;
      ep.abort.abort(new Error(ep.stray));
    }
    return;
  }
  if (ep) ep.holder.unhandled++;
  else for (const h of guard.holders) h.unhandled++;
  if (guard.seen.has(text) || guard.seen.size >= 256) return;
  guard.seen.add(text);
  const log = ep?.holder.log ?? [...guard.holders][0]?.log ?? guard.lastLog;
  safeLog(log, `an agent left ${what}${ep ? ` (${ep.where}, after it ended)` : ""}: ${text}; the run goes on`);
}

function onUnhandledRejection(reason: unknown): void {
  leftBehind("a promise rejection unhandled", describeThrown(reason), agentScope.getStore());
}

/**
 * An exception thrown in a callback (a timer, an event) with nobody to catch it. An agent's (its async
 * context says so) fails its episode; any other is left to Node, which ends the process as it would
 * have (unless someone else listens for these).
 */
function onUncaughtException(err: unknown): void {
  const ep = agentScope.getStore();
  if (ep) return leftBehind("an exception uncaught", describeThrown(err), ep);
  if (process.listenerCount("uncaughtException") > 1) return;
  process.off("uncaughtException", onUncaughtException);
  process.nextTick(() => {
    throw err;
  });
}

function holdGuard(holder: GuardHolder): void {
  guard.holders.add(holder);
  guard.lastLog = holder.log;
  clearTimeout(guard.timer);
  guard.timer = undefined;
  if (!guard.installed) {
    process.on("unhandledRejection", onUnhandledRejection);
    process.on("uncaughtException", onUncaughtException);
    guard.installed = true;
  }
}

function releaseGuard(holder: GuardHolder): void {
  guard.holders.delete(holder);
  if (guard.holders.size > 0 || guard.timer) return;
  guard.timer = setTimeout(() => {
    guard.timer = undefined;
    if (guard.holders.size > 0) return;
    process.off("unhandledRejection", onUnhandledRejection);
    process.off("uncaughtException", onUncaughtException);
    guard.installed = false;
    guard.seen.clear();
    agentScope.disable();
  }, GUARD_GRACE_MS);
  guard.timer.unref();
}

function safeLog(log: ((line: string) => void) | undefined, line: string): void {
  try {
    log?.(line);
  } catch {
    // a log that throws loses its line, not the run
  }
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
  const maxTurns = opts.maxTurns ?? LOOP_DEFAULTS.maxTurns;
  if (!(Number.isInteger(maxTurns) && maxTurns > 0))
    throw new InputError(`agentRollout: maxTurns must be a positive integer, got ${maxTurns}`);
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
      maxTurns,
      temperature: opts.temperature ?? 1,
      topP: opts.topP ?? 1,
      agentSampling: opts.agentSampling ?? "recipe",
      log: opts.log,
    }).start());
  const said = opts.said ?? new Set<string>();
  const traffic = { requests: 0, segments: {} as Record<string, number>, replays: 0 };
  const note = (line: string) => {
    if (said.has(line)) return;
    said.add(line);
    (opts.log ?? ((l: string) => process.stderr.write(l + "\n")))(line);
  };
  const timeoutMs = opts.timeoutMs ?? 300_000;
  const jobs = rows.flatMap((row, r) => Array.from({ length: n }, (_, s) => ({ row, rowIndex: r, sampleIndex: s })));
  const all: Trajectory[] = new Array(jobs.length);
  const agentMetrics = new Map<string, Record<string, number>>();
  const segmentReasons = new Map<string, string[]>();
  const holder: GuardHolder = { log: opts.log ?? toStderr, unhandled: 0 };
  const t0 = performance.now();

  const runOne = async (i: number) => {
    const job = jobs[i];
    const seed = opts.seed === undefined ? undefined : new Rng(opts.seed, i).int(0x7fffffff);
    const ep = gateway.open({ rowIndex: job.rowIndex, sampleIndex: job.sampleIndex, row: job.row, seed });
    const live: LiveEpisode = {
      id: ep.id,
      where: `agent episode ${ep.id} (row ${job.rowIndex + 1}, sample ${job.sampleIndex + 1})`,
      holder,
      ended: false,
      abort: new AbortController(),
      route: { baseURL: ep.baseURL, apiKey: ep.apiKey },
    };
    const abort = live.abort;
    const timer = setTimeout(
      () => abort.abort(new Error(`the agent ran past its timeout of ${timeoutMs} ms`)),
      timeoutMs,
    );
    const failed = (message: string) => {
      safeLog(opts.log, `${live.where} failed: ${message}`);
      return new TrajectoryBuilder(ep.id, job.rowIndex, job.sampleIndex).finish("failed", {
        error: { stage: "step", name: "AgentError", message },
      });
    };
    try {
      const stopped = new Promise<never>((_, reject) =>
        abort.signal.addEventListener("abort", () => reject(abort.signal.reason), { once: true }),
      );
      const ctx: AgentContext = {
        baseURL: ep.baseURL,
        apiKey: ep.apiKey,
        model: gateway.model,
        signal: abort.signal,
        rowIndex: job.rowIndex,
        sampleIndex: job.sampleIndex,
      };
      // In the episode's own async context (a rejection its code leaves is pinned on it); a synchronous throw is a rejection.
      const run = agentScope.run(live, () => Promise.resolve().then(() => agent(job.row, ctx)));
      let result: { reward: number; metrics: Record<string, number> } | undefined;
      let problem: string | undefined;
      try {
        result = outcome(await Promise.race([run, stopped]));
      } catch (e) {
        problem = instanceOf(e, BadOutcome) ? (e as BadOutcome).message : agentFailure(e);
      }
      // A rejection the agent left just before returning is reported once the current microtasks have run.
      await new Promise((r) => setImmediate(r));
      live.ended = true;
      problem = live.stray ?? problem;
      const rec = ep.recorder;
      traffic.requests += rec.sampled;
      traffic.replays += rec.replays;
      for (const r of rec.segmentReasons)
        traffic.segments[segmentCode(r)] = (traffic.segments[segmentCode(r)] ?? 0) + 1;
      for (const asked of rec.samplingAsked)
        note(
          `an agent asked for ${asked} (the recipe's sampling wins; set rollout.agentSampling: agent to let the request's win)`,
        );
      // Another conversation reached this episode (a shared client): it fails whole, never mixed.
      if (rec.mixed !== undefined) {
        rec.finish(0);
        all[i] = failed(rec.mixed);
        return;
      }
      // A limit ended the episode: it is kept, whatever the agent did after it was refused.
      if (problem !== undefined && !rec.truncated) {
        rec.finish(0);
        all[i] = failed(problem);
        return;
      }
      const t = rec.finish(problem === undefined ? result!.reward : 0);
      all[i] = t ?? failed(rec.refusal ?? "the agent never called the model");
      if (t) {
        agentMetrics.set(t.id, problem === undefined ? result!.metrics : {});
        if (rec.segmentReasons.length) segmentReasons.set(t.id, [...rec.segmentReasons]);
      }
    } catch (e) {
      all[i] = failed(`recording the episode failed: ${describeThrown(e)}`);
    } finally {
      live.ended = true;
      clearTimeout(timer);
      abort.abort(); // a client still waiting on the gateway stops
      gateway.close(ep.id);
    }
  };

  holdGuard(holder);
  try {
    let next = 0;
    const limit = Math.min(opts.concurrency ?? jobs.length, jobs.length);
    await Promise.all(
      Array.from({ length: limit }, async () => {
        while (next < jobs.length) await runOne(next++);
      }),
    );
  } finally {
    try {
      if (own) await gateway.stop();
    } finally {
      releaseGuard(holder);
    }
  }
  const rewrites = Object.values(traffic.segments).reduce((a, b) => a + b, 0);
  if (traffic.requests >= 20 && rewrites > 0.05 * traffic.requests)
    note(
      `${rewrites} of ${traffic.requests} agent requests (${((100 * rewrites) / traffic.requests).toFixed(0)} %) rewrote the conversation and started a new segment (${Object.entries(
        traffic.segments,
      )
        .map(([k, v]) => `${k} ${v}`)
        .join(
          ", ",
        )}): each segment trains as its own sequence; an agent that sends back its history as it got it trains on whole episodes`,
    );
  return {
    trajectories: all.filter((t) => t.endReason !== "failed"),
    failed: all.filter((t) => t.endReason === "failed"),
    metrics: { ...rolloutMetrics(all, performance.now() - t0), gateway: traffic },
    agentMetrics,
    segmentReasons,
    unhandledRejections: holder.unhandled,
  };
}
