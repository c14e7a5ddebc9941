/**
 * Rollout benchmark. A tiny random model (initModel
 * "tiny") on the local engine; every turn calls one tool (a scripted format
 * stands in for the model's tool calls, which a random model cannot write).
 *
 * 1. Throughput: B trajectories x `turns` turns, all in flight at once, with a
 *    tool answering at once and after 200 ms. Turn lengths vary as in real
 *    rollouts: a turn ends on any of `stopIds` ordinary token ids (the random
 *    model's next-token distribution is near uniform, so about
 *    stopIds/vocab per token: ~90 tokens on average) or at `turnTokens`.
 *    Rollout tokens/s = sampled action tokens / wall time.
 * 2. Prefill: a few trajectories whose sample calls go one at a time; before
 *    each, a 1-token probe on the same context measures its prefill (engine
 *    `stats().scheduler.prefillTokens` delta and wall time) with the cache
 *    exactly as the real call finds it. Turn 8 is compared with turn 1.
 *
 * Ends with one JSON line:
 *   {"throughput_kept_with_200ms_tools":x,"turn8_over_turn1_prefill":y}
 *   node dist/bench/rollout.js [--trajectories 64] [--turn-tokens 256] [--stop-ids 10] [--workers N]
 * With --gateway it measures the recording gateway instead (bench/gateway.ts).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { z } from "zod";
import { initModel } from "../src/model/init-model.js";
import { LocalEngine } from "../src/engine/local/local-engine.js";
import type { Engine, SampleResult, SamplingParams } from "../src/engine/types.js";
import {
  ToolEnv,
  chatSetup,
  defineTool,
  hermesFormat,
  rollout,
  stepContext,
  type ToolCallFormat,
} from "../src/agent/index.js";

const { values: args } = parseArgs({
  options: {
    trajectories: { type: "string", default: "32" },
    repeats: { type: "string", default: "2" },
    turns: { type: "string", default: "8" },
    "turn-tokens": { type: "string", default: "256" },
    "stop-ids": { type: "string", default: "10" },
    workers: { type: "string" },
    "probe-trajectories": { type: "string", default: "8" },
    gateway: { type: "boolean", default: false },
    rows: { type: "string", default: "16" },
    n: { type: "string", default: "4" },
    clients: { type: "string" },
  },
});
const B = Number(args.trajectories),
  TURNS = Number(args.turns),
  TURN_TOKENS = Number(args["turn-tokens"]);
if (!(TURNS >= 8)) throw new Error(`--turns must be at least 8 (turn 8 is compared with turn 1), got ${args.turns}`);
/** Ordinary (non-special) token ids that end a turn. */
const STOP_IDS = Array.from({ length: Number(args["stop-ids"]) }, (_, i) => 100 + 37 * i);

const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve) => {
    const t = setTimeout(resolve, ms);
    signal?.addEventListener("abort", () => (clearTimeout(t), resolve()));
  });

function waitTool(delayMs: number) {
  return defineTool({
    name: "wait",
    description: "Answers after a fixed delay.",
    inputSchema: z.object({}),
    // The same text whatever the delay, so both runs sample the same tokens.
    execute: async (_, ctx) => (await sleep(delayMs, ctx.signal), `call ${ctx.callIndex}: done`),
  });
}

/** Every turn makes one call to `wait`, whatever the (random) model wrote. */
const scriptedCalls: ToolCallFormat = {
  ...hermesFormat,
  name: "bench-scripted",
  parse: (text) => ({ content: text, calls: [{ ok: true, name: "wait", arguments: {}, raw: "" }] }),
  assistantMessage: (text) => ({ role: "assistant", content: text }),
};

const rows = (n: number) =>
  Array.from({ length: n }, (_, i) => ({
    prompt: [{ role: "user", content: `Task ${i}: call the wait tool, then report what it said.` }],
  }));
const envFor = (delayMs: number) => () =>
  new ToolEnv({ tools: [waitTool(delayMs)], format: scriptedCalls, answerPattern: null });

async function throughput(engine: LocalEngine, delayMs: number, n: number, seed: number) {
  await engine.clearPrefixCache();
  const s0 = await engine.stats();
  const res = await rollout(engine, envFor(delayMs), rows(n), {
    chat: chatSetup(engine.tokenizer),
    maxTurns: TURNS,
    maxTokensPerTurn: TURN_TOKENS,
    stop: STOP_IDS,
    seed,
    driftCheck: false,
  });
  if (res.metrics.failed > 0)
    throw new Error(`${res.metrics.failed} trajectories failed: ${res.failed[0].error?.message}`);
  const s1 = await engine.stats();
  const steps = s1.scheduler.decodeSteps - s0.scheduler.decodeSteps;
  return {
    tps: res.metrics.actionTokensPerSecond,
    seconds: res.metrics.wallMs / 1000,
    tokens: res.metrics.actionTokens,
    meanTurnTokens: res.metrics.actionTokens / (n * TURNS),
    meanDecodeBatch: (s1.scheduler.decodedRows - s0.scheduler.decodedRows) / steps,
    prefixHitRate:
      (s1.prefixCache.reusedTokens - s0.prefixCache.reusedTokens) /
      (s1.prefixCache.promptTokens - s0.prefixCache.promptTokens),
  };
}

interface Probe {
  prompt: number[];
  prefillTokens: number;
  ms: number;
}

/** Runs sample calls one at a time, each after a 1-token probe that measures its prefill. */
class PrefillProbe implements Engine {
  readonly probes: Probe[] = [];
  private queue: Promise<unknown> = Promise.resolve();
  constructor(private readonly inner: LocalEngine) {}

  sample(prompt: number[], params?: SamplingParams): Promise<SampleResult> {
    const run = async () => {
      const s0 = await this.inner.stats();
      const t0 = performance.now();
      await this.inner.sample(prompt, { maxTokens: 1, temperature: 0, stop: [] });
      const ms = performance.now() - t0;
      const s1 = await this.inner.stats();
      this.probes.push({
        prompt: prompt.slice(),
        prefillTokens: s1.scheduler.prefillTokens - s0.scheduler.prefillTokens,
        ms,
      });
      return this.inner.sample(prompt, params);
    };
    const p = this.queue.then(run);
    this.queue = p.catch(() => undefined);
    return p;
  }
  computeLogprobs = (...a: Parameters<Engine["computeLogprobs"]>) => this.inner.computeLogprobs(...a);
  forwardBackward = (...a: Parameters<Engine["forwardBackward"]>) => this.inner.forwardBackward(...a);
  optimStep = (...a: Parameters<Engine["optimStep"]>) => this.inner.optimStep(...a);
  save = (dir: string) => this.inner.save(dir);
  load = (dir: string) => this.inner.load(dir);
}

async function prefill(engine: LocalEngine, n: number) {
  await engine.clearPrefixCache();
  const probe = new PrefillProbe(engine);
  const res = await rollout(probe, envFor(0), rows(n), {
    chat: chatSetup(engine.tokenizer),
    maxTurns: TURNS,
    maxTokensPerTurn: 32,
    stop: [],
    seed: 2,
    driftCheck: false,
  });
  const same = (a: number[], b: number[]) => a.length === b.length && a.every((x, i) => x === b[i]);
  const at = (turn: number) =>
    res.trajectories.map((t) => probe.probes.find((p) => same(p.prompt, stepContext(t, turn)))!);
  const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
  const summary = (ps: Probe[]) => ({
    ms: mean(ps.map((p) => p.ms)),
    prefillTokens: mean(ps.map((p) => p.prefillTokens)),
    contextTokens: mean(ps.map((p) => p.prompt.length)),
  });
  const turn1 = summary(at(0)),
    turn8 = summary(at(7));
  return { turn1, turn8, ratioMs: turn8.ms / turn1.ms, ratioTokens: turn8.prefillTokens / turn1.prefillTokens };
}

async function main() {
  const root = mkdtempSync(join(tmpdir(), "agent-r1-bench-rollout-"));
  try {
    await initModel({ preset: "tiny", out: join(root, "tiny"), seed: 1 });
    const engine = await LocalEngine.load(
      join(root, "tiny"),
      args.workers !== undefined ? { workers: Number(args.workers) } : {},
    );
    const t0 = performance.now();
    await throughput(engine, 0, Math.min(B, 8), 0); // warm-up: kernels, worker threads
    // Alternate the two settings (same seeds per pair) so drift in machine speed hits both alike.
    const tps: Record<number, number[]> = { 0: [], 200: [] };
    for (let r = 0; r < Number(args.repeats); r++) {
      for (const delay of [0, 200]) {
        const m = await throughput(engine, delay, B, r + 1);
        tps[delay].push(m.tps);
        console.log(
          JSON.stringify({
            workload: "throughput",
            tool_delay_ms: delay,
            repeat: r,
            trajectories: B,
            turns: TURNS,
            max_turn_tokens: TURN_TOKENS,
            workers: engine.workers,
            ...round(m),
          }),
        );
      }
    }
    const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
    const kept = mean(tps[200]) / mean(tps[0]);
    const p = await prefill(engine, Number(args["probe-trajectories"]));
    console.log(JSON.stringify({ workload: "prefill", ...round(p) }));
    console.log(
      JSON.stringify({
        workload: "total",
        seconds: (performance.now() - t0) / 1000,
        rss_mb: Math.round(process.resourceUsage().maxRSS / 1024),
      }),
    );
    await engine.dispose();
    console.log(
      JSON.stringify({ throughput_kept_with_200ms_tools: round(kept), turn8_over_turn1_prefill: round(p.ratioMs) }),
    );
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}

function round<T>(x: T): T {
  if (typeof x === "number") return (Math.round(x * 1000) / 1000) as T;
  if (typeof x === "object" && x !== null)
    return Object.fromEntries(Object.entries(x).map(([k, v]) => [k, round(v)])) as T;
  return x;
}

(args.gateway
  ? import("./gateway.js").then((m) =>
      m.gatewayBench({
        rows: Number(args.rows),
        n: Number(args.n),
        repeats: Number(args.repeats),
        clients: args.clients,
      }),
    )
  : main()
).then(
  () => process.exit(0),
  (e) => {
    console.error(e);
    process.exit(1);
  },
);
