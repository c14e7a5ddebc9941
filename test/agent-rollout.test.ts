/**
 * Batched rollouts on a scripted engine: groups in row-major order, failures
 * isolated and counted, tool waits overlapping across trajectories, seeds
 * reproducible, JSON round trips and the decoded view.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { z } from "zod";
import { rollout } from "../src/agent/rollout.js";
import { defineTool } from "../src/agent/tool.js";
import { ToolEnv } from "../src/agent/tool-env.js";
import { hermesFormat } from "../src/agent/formats/hermes.js";
import { decodeTrajectory, formatTrajectory } from "../src/agent/trajectory-view.js";
import { ScriptedEngine, assistantTurns, chatmlTokenizer } from "../src/testing/index.js";

const tok = chatmlTokenizer();
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const rows = ["alpha", "beta", "gamma"].map((w) => ({
  prompt: [{ role: "user", content: `Look up ${w}.` }],
  reward_model: { ground_truth: w.toUpperCase() },
}));

const lookup = (delayMs: number) =>
  defineTool({
    name: "lookup",
    description: "Upper-cases a word after a delay.",
    inputSchema: z.object({ word: z.string() }),
    execute: async ({ word }, ctx) => (
      await sleep(delayMs),
      { text: word.toUpperCase(), reward: ctx.groundTruth === word.toUpperCase() ? 0.1 : 0 }
    ),
  });

/** Two tool turns, then the answer, for whichever word the prompt asks about. */
function wordEngine(delayMs = 0) {
  let inFlight = 0;
  const engine = new ScriptedEngine(tok, async (c) => {
    inFlight++;
    engine.maxInFlight = Math.max(engine.maxInFlight, inFlight);
    await sleep(delayMs);
    inFlight--;
    const word = /Look up (\w+)\./.exec(c.text)![1];
    const turn = assistantTurns(c.text);
    return (
      (turn < 2
        ? hermesFormat.write({ name: "lookup", arguments: { word } })
        : `<answer>${word.toUpperCase()}</answer>`) + "<|im_end|>"
    );
  }) as ScriptedEngine & { maxInFlight: number };
  engine.maxInFlight = 0;
  return engine;
}

const envOf = (delayMs: number) => () =>
  new ToolEnv({ tools: [lookup(delayMs)], outcomeReward: ({ answer, groundTruth }) => Number(answer === groundTruth) });

test("rows x n trajectories in row-major order, rewards and metrics", async () => {
  const res = await rollout(wordEngine(), envOf(0), rows, { n: 2 });
  assert.deepEqual(
    res.trajectories.map((t) => [t.id, t.rowIndex, t.sampleIndex]),
    [
      ["r0-s0", 0, 0],
      ["r0-s1", 0, 1],
      ["r1-s0", 1, 0],
      ["r1-s1", 1, 1],
      ["r2-s0", 2, 0],
      ["r2-s1", 2, 1],
    ],
  );
  for (const t of res.trajectories)
    assert.deepEqual([t.endReason, t.steps.length, t.reward], ["done", 3, 0.1 + 0.1 + 1]);
  const m = res.metrics;
  assert.deepEqual(
    [m.trajectories, m.failed, m.toolCalls, m.meanTurns, m.driftChecked, m.driftMismatches],
    [6, 0, 12, 3, 6, 0],
  );
  assert.equal(
    m.actionTokens,
    res.trajectories.reduce((s, t) => s + t.steps.reduce((a, x) => a + x.action.length, 0), 0),
  );
  assert.ok(m.actionTokensPerSecond > 0);
});

test("trajectories survive JSON round trips and decode for people", async () => {
  const {
    trajectories: [t],
  } = await rollout(wordEngine(), envOf(0), rows.slice(0, 1));
  assert.deepEqual(JSON.parse(JSON.stringify(t)), t);
  const d = decodeTrajectory(t, tok);
  assert.equal(
    d.steps[0].action,
    '<tool_call>\n{"name": "lookup", "arguments": {"word": "alpha"}}\n</tool_call><|im_end|>',
  );
  assert.match(d.steps[0].context!, /Look up alpha\./);
  assert.deepEqual(
    d.steps[0].toolCalls.map((c) => [c.name, c.ok, c.text]),
    [["lookup", true, "ALPHA"]],
  );
  assert.match(formatTrajectory(t, tok), /--- action 2 \(stop, reward 1\) ---\n<answer>ALPHA<\/answer>/);
});

test("a failing env is left out and counted; the others go on", async () => {
  let made = 0;
  const res = await rollout(
    wordEngine(),
    (row, i) => {
      made++;
      if (i === 1) throw new Error("factory broke");
      const env = envOf(0)();
      if (i === 2)
        env.reset = () => {
          throw new Error("reset broke");
        };
      if (i === 4)
        env.step = async () => {
          throw new RangeError("step broke");
        };
      return env;
    },
    rows,
    { n: 2 },
  );
  assert.equal(made, 6);
  assert.deepEqual(
    res.failed.map((t) => [t.id, t.error?.stage, t.error?.message]),
    [
      ["r0-s1", "reset", "env factory: factory broke"],
      ["r1-s0", "reset", "reset broke"],
      ["r2-s0", "step", "step broke"],
    ],
  );
  assert.deepEqual(
    res.trajectories.map((t) => t.id),
    ["r0-s0", "r1-s1", "r2-s1"],
  );
  assert.deepEqual(
    [
      res.metrics.trajectories,
      res.metrics.failed,
      res.metrics.failedAtReset,
      res.metrics.failedAtStep,
      res.metrics.endReasons.failed,
    ],
    [3, 3, 2, 1, 3],
  );
});

test("tool waits of one trajectory do not block the others", async () => {
  // A lookup waits until all six trajectories are inside a lookup at once (or, failing that,
  // 200 ms, so that a product that runs them one by one fails quickly instead of hanging). The
  // six first lookups start right after the six first samples, whose 10 ms sleeps all end before
  // any 200 ms one can: when trajectories overlap, all six are in a lookup together, however
  // fast or slow the machine. Counted, not timed.
  const trajectories = rows.length * 2;
  let inFlight = 0;
  let maxInFlight = 0;
  const started: string[] = [];
  let allWaiting!: () => void;
  const everyoneWaits = new Promise<void>((r) => (allWaiting = r));
  const gated = defineTool({
    name: "lookup",
    description: "Upper-cases a word once every trajectory is waiting on a lookup.",
    inputSchema: z.object({ word: z.string() }),
    execute: async ({ word }, ctx) => {
      started.push(word);
      maxInFlight = Math.max(maxInFlight, ++inFlight);
      if (inFlight === trajectories) allWaiting();
      await Promise.race([everyoneWaits, sleep(200)]);
      inFlight--;
      return { text: word.toUpperCase(), reward: ctx.groundTruth === word.toUpperCase() ? 0.1 : 0 };
    },
  });
  const engine = wordEngine(10);
  const res = await rollout(
    engine,
    () => new ToolEnv({ tools: [gated], outcomeReward: ({ answer, groundTruth }) => Number(answer === groundTruth) }),
    rows,
    { n: 2 },
  );
  assert.equal(maxInFlight, trajectories, "all six trajectories waited on a tool at the same time");
  assert.deepEqual(started.slice(0, trajectories).sort(), ["alpha", "alpha", "beta", "beta", "gamma", "gamma"]);
  assert.equal(started.length, 2 * trajectories, "two lookups per trajectory");
  assert.ok(engine.maxInFlight >= 6, `sample calls overlapped (max ${engine.maxInFlight} in flight)`);
  assert.equal(res.metrics.trajectories, 6);
  assert.deepEqual(
    res.trajectories.map((t) => t.reward),
    Array(trajectories).fill(1.2),
  );
});

test("concurrency caps the trajectories in flight", async () => {
  const engine = wordEngine(5);
  await rollout(engine, envOf(0), rows, { n: 2, concurrency: 2 });
  assert.equal(engine.maxInFlight, 2);
});

test("a seed gives each trajectory and turn its own reproducible sampling seed", async () => {
  const seeds = async () => {
    const engine = wordEngine();
    await rollout(engine, envOf(0), rows, { n: 2, seed: 11 });
    return engine.calls
      .map((c) => [/Look up (\w+)/.exec(c.text)![1], assistantTurns(c.text), c.params.seed])
      .sort()
      .map(String);
  };
  const a = await seeds();
  assert.deepEqual(await seeds(), a);
  // 3 rows x 2 samples x 3 turns: all distinct, since sample 0 and 1 of a row must not draw alike.
  assert.equal(new Set(a.map((s) => s.split(",")[2])).size, 18);
});

test("an engine error rejects the rollout once every trajectory has settled", async () => {
  let settled = 0;
  const engine = new ScriptedEngine(tok, async (c) => {
    if (c.text.includes("beta")) throw new Error("engine out of memory");
    await sleep(30);
    settled++;
    return "<answer>x</answer><|im_end|>";
  });
  await assert.rejects(rollout(engine, envOf(0), rows), /engine out of memory/);
  assert.equal(settled, 2);
});

test("maxTotalTokens defaults to the model's context length when the engine knows it", async () => {
  const engine = Object.assign(wordEngine(), { config: { maxPositionEmbeddings: 200 } });
  const res = await rollout(engine, envOf(0), rows.slice(0, 1));
  assert.ok(engine.calls.every((c) => c.prompt.length + (c.params.maxTokens ?? 0) <= 200));
  assert.equal(res.trajectories[0].endReason, "max_total_tokens");
  assert.ok(res.trajectories[0].metrics.finalTokens <= 200);
});

test("after an engine error no new trajectory starts", async () => {
  const engine = new ScriptedEngine(tok, async (c) => {
    if (c.text.includes("alpha")) throw new Error("engine crashed");
    return "<answer>x</answer><|im_end|>";
  });
  await assert.rejects(rollout(engine, envOf(0), rows, { n: 2, concurrency: 1 }), /engine crashed/);
  assert.equal(engine.calls.length, 1);
});
