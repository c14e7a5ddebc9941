/**
 * Trained compaction (src/agent/compaction-flow.ts), driven by scripted engines: the summary is
 * asked for exactly when the context passes atTokens; the summary turn is trained (weight 1) and
 * the request and observations are not; the pieces of an episode are separate datums of one
 * sequence, with one advantage and one place in the group statistics; keepLast turns survive
 * verbatim, token for token; the options and the recipe keys are checked in one line each; a
 * trainer iteration runs with compaction; and on long-horizon multi-hop questions a scripted
 * searcher that truncation cuts off finishes with compaction.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { z } from "zod";
import { AgentLoop } from "../src/agent/agent-loop.js";
import { chatSetup } from "../src/agent/chat-setup.js";
import { CompactionFlow, COMPACTION_TURN, type CompactionFlowOptions } from "../src/agent/compaction-flow.js";
import { COMPACTION_DEFAULTS, resolveCompaction } from "../src/agent/compaction-options.js";
import { hermesFormat } from "../src/agent/formats/hermes.js";
import { observationDeltaTokens } from "../src/agent/observation-delta.js";
import { defineTool } from "../src/agent/tool.js";
import { ToolEnv } from "../src/agent/tool-env.js";
import { segments, stepContext, type Trajectory } from "../src/agent/trajectory.js";
import { aggregationCoefficients } from "../src/rl/aggregation.js";
import { trajectoryDatums } from "../src/rl/datums.js";
import { prepareBatch } from "../src/train/prepare-batch.js";
import { parseConfig } from "../src/train/load-config.js";
import { InputError } from "../src/util/errors.js";
import { ScriptedEngine, chatmlTokenizer, fakeLogprob } from "../src/testing/index.js";
import { longHorizonReply, questionNames, type SummaryStyle } from "../src/tasks/multihop/compaction-expert.js";
import type { Action, Env, StepResult } from "../src/agent/env.js";
import { localEngines } from "../src/engine/local/factory.js";
import type { Task, TaskRow } from "../src/tasks/types.js";
import { Trainer } from "../src/train/trainer.js";
import { rollout } from "../src/agent/rollout.js";
import { createMultihopTask } from "../src/tasks/multihop/task.js";
import { digitShare, toyTask } from "./fixtures/toy-task.js";
import { tempDir } from "./helpers.js";

const tok = chatmlTokenizer();
const chat = chatSetup(tok);
const EOT = "<|im_end|>";
const PROMPT = COMPACTION_DEFAULTS.prompt;

/** Each call returns a numbered fact, long enough that a few of them fill a small context. */
const note = defineTool({
  name: "note",
  description: "Returns fact k.",
  inputSchema: z.object({ k: z.number() }),
  execute: ({ k }) => `fact ${k}: ${"abc ".repeat(12)}`,
});
const row = {
  prompt: [
    { role: "system", content: "Collect facts, then answer." },
    { role: "user", content: "Collect five facts." },
  ],
  reward_model: { ground_truth: "done" },
};
const makeEnv = () =>
  new ToolEnv({ tools: [note], outcomeReward: ({ answer, groundTruth }) => (answer === groundTruth ? 1 : 0) });

const asksForSummary = (text: string) => text.endsWith(`${PROMPT}${EOT}\n<|im_start|>assistant\n`);

/** Calls `note` `calls` times (k = 0, 1, ...), then answers; summarizes whenever asked. */
function policy(calls: number, answer = "done") {
  let acted = 0;
  return new ScriptedEngine(tok, (c) => {
    if (asksForSummary(c.text)) return `Summary: I noted facts 0 to ${acted - 1}.${EOT}`;
    const k = acted++;
    return (k < calls ? hermesFormat.write({ name: "note", arguments: { k } }) : `<answer>${answer}</answer>`) + EOT;
  });
}

const run = (flow: AgentLoop<typeof row>, sampleIndex = 0) => flow.run(makeEnv(), row, { sampleIndex });
const compaction = (c: CompactionFlowOptions["compaction"], calls = 5, answer = "done") =>
  new CompactionFlow<typeof row>(policy(calls, answer), chat, { maxTurns: 20, maxTotalTokens: 4096, compaction: c });
const summarySteps = (t: Trajectory) => t.steps.flatMap((s, i) => (s.info.flowTurn === COMPACTION_TURN ? [i] : []));
/** Without compaction: the context the next turn samples from after each step (what the flow compares with atTokens). */
const contextsAfter = (t: Trajectory) => t.steps.slice(0, -1).map((_, k) => stepContext(t, k + 1).length);

test("the summary is asked for exactly when the context passes atTokens", async () => {
  const plain = await run(new AgentLoop(policy(5), chat, { maxTurns: 20, maxTotalTokens: 4096 }));
  const after = contextsAfter(plain);
  assert.equal(plain.endReason, "done");
  // At atTokens the context does not pass it yet: the request follows the next env step.
  const atEqual = await run(compaction({ atTokens: after[1] }));
  assert.equal(summarySteps(atEqual)[0], 3);
  const justBelow = await run(compaction({ atTokens: after[1] - 1 }));
  assert.equal(summarySteps(justBelow)[0], 2);
  const never = await run(compaction({ atTokens: after[after.length - 1] + 1 }));
  assert.deepEqual(summarySteps(never), []);
  assert.equal(never.steps.length, plain.steps.length);
  // The turn before the summary carries the request after its tool response, and the summary is the model's own.
  const asked = justBelow.steps[1];
  assert.match(tok.decode(asked.observation), new RegExp(`</tool_response>${EOT}\\n<\\|im_start\\|>user\\n${PROMPT}`));
  const summary = justBelow.steps[2];
  assert.equal(tok.decode(summary.action), `Summary: I noted facts 0 to 1.${EOT}`);
  assert.deepEqual(summary.logprobs, summary.action.map(fakeLogprob));
  assert.deepEqual([summary.reward, summary.done, summary.toolCalls.length], [0, false, 0]);
  assert.equal(justBelow.steps[3].extendsPrevious, false, "the context is rebuilt after the summary");
  assert.equal(justBelow.endReason, "done");
  assert.equal(justBelow.reward, 1);
});

test("the summary's tokens are trained (weight 1); the request and the observations are not", async () => {
  const t = await run(compaction({ atTokens: 500, keepLast: 1 }));
  const [s] = summarySteps(t);
  assert.ok(s !== undefined);
  const segs = segments(t);
  const piece = segs.findIndex((seg) => seg.includes(s));
  assert.equal(segs[piece][segs[piece].length - 1], s, "the summary ends the piece before the compaction");
  assert.equal(segs[piece + 1][0], s + 1, "and the next piece starts right after it");
  const { datums, steps } = trajectoryDatums(t);
  assert.equal(datums.length, segs.length);
  const d = datums[piece];
  const at = steps[piece].flatMap((k, i) => (k === s ? [i] : []));
  assert.deepEqual(
    at.map((i) => d.targetTokens[i]),
    t.steps[s].action,
  );
  assert.ok(at.every((i) => d.weights[i] === 1));
  // Every target that is not an action token, the request among them, has weight 0.
  const request = tok.encode(PROMPT);
  const start = d.targetTokens.findIndex((_, i) => request.every((x, j) => d.targetTokens[i + j] === x));
  assert.ok(start > 0, "the request is in the piece's tokens");
  for (let i = start; i < start + request.length; i++) assert.equal(d.weights[i], 0);
  d.weights.forEach((w, i) => assert.equal(w, steps[piece][i] >= 0 ? 1 : 0));
});

test("the pieces share the episode's advantage and count as one sequence and one episode", async () => {
  const good = await run(compaction({ atTokens: 500 }), 0);
  const bad = await run(compaction({ atTokens: 500 }, 5, "wrong"), 1);
  assert.ok(segments(good).length >= 2 && segments(bad).length >= 2, "both episodes were compacted");
  assert.deepEqual([good.reward, bad.reward], [1, 0]);
  const batch = await prepareBatch([good, bad], parseConfig({ algorithm: { estimator: "grpo" } }), {}, 0);
  assert.equal(batch.kept.length, 2, "two episodes, however many pieces");
  assert.equal(batch.datums.length, segments(good).length + segments(bad).length);
  assert.deepEqual(
    batch.datums.map((d) => d.sequence),
    [...segments(good).map(() => 0), ...segments(bad).map(() => 1)],
  );
  // GRPO over the group of two episodes: ±(1 − 0.5) / std([1, 0]) on every action token of every piece.
  const z = 0.5 / Math.SQRT1_2;
  for (const d of batch.datums) {
    const expected = d.sequence === 0 ? z : -z;
    d.weights.forEach((w, i) => {
      if (w > 0) assert.ok(Math.abs(d.advantages![i] - expected) < 1e-5, `advantage ${d.advantages![i]} on a piece`);
    });
  }
  // seq-mean-token-sum divides by the number of sequences: 2 episodes, not the pieces' count.
  const coef = aggregationCoefficients(batch.datums, "seq-mean-token-sum");
  coef.forEach((row, j) => row.forEach((c, i) => assert.equal(c, batch.datums[j].weights[i] / 2)));
});

test("keepLast turns follow the summary token for token; the rest is the first prompt and the summary", async () => {
  for (const keepLast of [0, 1, 2, 3]) {
    const t = await run(compaction({ atTokens: 450, keepLast }, 6));
    const [s] = summarySteps(t);
    const next = t.steps[s + 1];
    assert.equal(next.extendsPrevious, false);
    const ctx = next.context!;
    const prompt = stepContext(t, 0);
    const reopen = observationDeltaTokens(chat, { history: row.prompt, messages: [], actionClosed: true });
    const head = [...prompt, ...t.steps[s].action, ...reopen];
    assert.deepEqual(ctx.slice(0, head.length), head, `keepLast ${keepLast}: prompt, summary, reopening`);
    // The kept turns: the env steps just before the summary, actions and observations as recorded,
    // except that the last one's observation is the env's alone (without the request).
    const kept = Array.from({ length: Math.min(keepLast, s) }, (_, i) => s - Math.min(keepLast, s) + i);
    let at = head.length;
    kept.forEach((k, i) => {
      const st = t.steps[k];
      assert.deepEqual(ctx.slice(at, at + st.action.length), st.action, `keepLast ${keepLast}: action of step ${k}`);
      at += st.action.length;
      if (i < kept.length - 1) {
        assert.deepEqual(ctx.slice(at, at + st.observation.length), st.observation);
        at += st.observation.length;
      } else {
        const own = ctx.slice(at);
        const genPrompt = tok.encode("assistant\n").length;
        assert.deepEqual(own.slice(0, -genPrompt), st.observation.slice(0, own.length - genPrompt));
        assert.ok(!tok.decode(own).includes(PROMPT));
        assert.ok(tok.decode(own).endsWith("<|im_start|>assistant\n"));
        at = ctx.length;
      }
    });
    assert.equal(at, ctx.length, `keepLast ${keepLast}: nothing else in the context`);
    const facts = (tok.decode(ctx).match(/fact \d/g) ?? []).map((f) => Number(f.slice(5)));
    assert.deepEqual(
      facts,
      kept.map((k) => k),
      `keepLast ${keepLast}: the facts of the kept turns only`,
    );
    assert.equal(t.endReason, "done");
    assert.equal(t.drift?.firstDiff, -1, "the compacted conversation re-renders to the same tokens");
  }
});

test("a second compaction keeps turns the first one kept, never a summary", async () => {
  const t = await run(compaction({ atTokens: 620, keepLast: 2 }, 10));
  const sums = summarySteps(t);
  assert.ok(sums.length >= 2, `compacted ${sums.length} times`);
  const [, second] = sums;
  const ctx = t.steps[second + 1].context!;
  const text = tok.decode(ctx);
  assert.equal(text.split("Summary:").length, 2, "only the latest summary");
  assert.ok(text.includes(tok.decode(t.steps[second].action)));
  // The two env turns just before the second summary, whichever piece they were recorded in.
  const envSteps = t.steps.flatMap((st, i) => (i < second && st.info.flowTurn === undefined ? [i] : []));
  for (const k of envSteps.slice(-2)) assert.ok(text.includes(tok.decode(t.steps[k].action)));
  assert.equal(t.endReason, "done");
});

test("compaction options: defaults, and one-line errors naming the field", () => {
  assert.deepEqual(resolveCompaction({ atTokens: 100 }, 200), { atTokens: 100, ...COMPACTION_DEFAULTS });
  const bad: [unknown, RegExp][] = [
    [{}, /^compaction\.atTokens must be a positive integer below maxTotalTokens \(200\), got undefined$/],
    [{ atTokens: 200 }, /^compaction\.atTokens .* below maxTotalTokens \(200\), got 200$/],
    [{ atTokens: 1.5 }, /^compaction\.atTokens /],
    [{ atTokens: 100, keepLast: -1 }, /^compaction\.keepLast must be a non-negative integer, got -1$/],
    [{ atTokens: 100, prompt: " " }, /^compaction\.prompt must be a non-empty string/],
    [{ atTokens: 100, keep: 2 }, /^compaction\.keep: unknown field; allowed: atTokens, keepLast, prompt$/],
    [null, /^compaction must be an object/],
  ];
  for (const [o, re] of bad) {
    assert.throws(
      () => resolveCompaction(o as never, 200),
      (e: Error) => e instanceof InputError && re.test(e.message) && !e.message.includes("\n"),
      JSON.stringify(o),
    );
  }
  assert.throws(
    () => new CompactionFlow(policy(1), chat, { maxTotalTokens: 300, compaction: { atTokens: 300 } }),
    /compaction\.atTokens .* below maxTotalTokens \(300\)/,
  );
});

test("recipe keys rollout.compaction.*: defaults, and one-line errors naming the key", () => {
  const cfg = parseConfig({ rollout: { compaction: { atTokens: 700 } } });
  assert.deepEqual(cfg.rollout.compaction, { atTokens: 700, keepLast: 2, prompt: PROMPT });
  assert.equal(parseConfig({}).rollout.compaction, undefined);
  const bad: [unknown, RegExp][] = [
    [{ atTokens: 1024 }, /^config: rollout\.compaction\.atTokens: must be below rollout\.maxTotalTokens \(1024\)/],
    [{ atTokens: 0 }, /^config: rollout\.compaction\.atTokens: /],
    [{ keepLast: 2 }, /^config: rollout\.compaction\.atTokens: /],
    [{ atTokens: 500, keepLast: -1 }, /^config: rollout\.compaction\.keepLast: /],
    [{ atTokens: 500, prompt: "" }, /^config: rollout\.compaction\.prompt: /],
    [
      { atTokens: 500, every: 3 },
      /^config: unknown key 'rollout\.compaction\.every'; allowed here: atTokens, keepLast, prompt$/,
    ],
  ];
  for (const [c, re] of bad)
    assert.throws(
      () => parseConfig({ rollout: { compaction: c } }),
      (e: Error) => e instanceof InputError && re.test(e.message) && !e.message.includes("\n"),
      JSON.stringify(c),
    );
});

/** An env that never ends by itself: each turn scores the share of digits and asks for more. */
class ChatterEnv implements Env<TaskRow> {
  private turn = 0;
  reset(row: TaskRow) {
    return { messages: [...row.prompt] };
  }
  step(action: Action): StepResult {
    this.turn++;
    return {
      observation: { messages: [{ role: "user", content: `Turn ${this.turn}. Another number.` }] },
      reward: digitShare(action.text),
      done: false,
      info: {},
    };
  }
}

test("a training iteration with rollout.compaction: compacted episodes, each one episode of the batch", async () => {
  const task: Task = { ...toyTask(4), makeEnv: () => new ChatterEnv() };
  const cfg = parseConfig({
    model: { preset: "tiny" },
    engine: { workers: 0 },
    rollout: {
      n: 2,
      maxTurns: 8,
      maxTokensPerTurn: 8,
      maxTotalTokens: 256,
      compaction: { atTokens: 90, keepLast: 1 },
    },
    algorithm: { filterConstantGroups: false },
    train: { iterations: 1, batchSize: 2, valEvery: 0, checkpointEvery: 0, samplesPerIteration: 0 },
  });
  const out = tempDir();
  const trainer = await Trainer.open(cfg, { out, task, engines: localEngines({ workers: 0 }) });
  try {
    const m = await trainer.step();
    assert.ok(m.compactions >= 1, `compactions per episode: ${m.compactions}`);
    assert.ok(Number.isFinite(m.loss));
  } finally {
    await trainer.close();
  }
});

/** The long-horizon expert (src/tasks/multihop/compaction-expert.ts) as a scripted engine. */
function searcher(style: SummaryStyle = "earliest") {
  return new ScriptedEngine(
    tok,
    (c) =>
      longHorizonReply(
        c.text,
        asksForSummary(c.text),
        (query) => hermesFormat.write({ name: "search", arguments: { query } }),
        style,
      ) + EOT,
  );
}

test("long-horizon multihop (hops 8): truncation is cut off before the answer, compaction finishes", async () => {
  const task = createMultihopTask({ hops: 8, train: 4, val: 4, test: 4 });
  const rows = task.rows("test");
  const limits = { maxTurns: 40, maxTokensPerTurn: 96, maxTotalTokens: 1024, tokenizer: tok };
  const makeEnv = (r: TaskRow) => task.makeEnv(r);
  const searches = (t: Trajectory) => t.steps.reduce((n, s) => n + s.toolCalls.length, 0);

  const cut = await rollout(searcher(), makeEnv, rows, limits);
  assert.equal(cut.trajectories.length, 4);
  for (const t of cut.trajectories) {
    assert.equal(t.endReason, "max_total_tokens");
    assert.equal(t.reward, 0);
    assert.ok(searches(t) < 8, `${searches(t)} searches before the context filled`);
  }

  const cutSearches = Math.max(...cut.trajectories.map(searches));
  const compacted = await rollout(searcher(), makeEnv, rows, { ...limits, compaction: { atTokens: 700, keepLast: 1 } });
  assert.equal(compacted.trajectories.length, 4);
  for (const t of compacted.trajectories) {
    const score = task.score(t, rows[t.rowIndex], tok);
    assert.equal(t.endReason, "done");
    assert.deepEqual([score.em, score.reward, t.reward], [1, 1, 1], tok.decode(t.steps[t.steps.length - 1].action));
    // One search per entity (fewer when a result shows two of them), more than a cut-off episode makes.
    assert.ok(searches(t) > cutSearches && searches(t) <= 8, `${searches(t)} searches`);
    assert.ok(summarySteps(t).length >= 2 && segments(t).length === summarySteps(t).length + 1);
    for (let k = 0; k < t.steps.length; k++) assert.ok(stepContext(t, k).length < 1024);
  }
  assert.ok(compacted.metrics.flowTurns >= 8);
});

test("ledger summaries (hops 8): each year found, in the question's order, then the earliest answered", async () => {
  const task = createMultihopTask({ hops: 8, train: 4, val: 4, test: 4 });
  const rows = task.rows("test");
  const res = await rollout(searcher("ledger"), (r: TaskRow) => task.makeEnv(r), rows, {
    maxTurns: 40,
    maxTokensPerTurn: 192,
    maxTotalTokens: 1024,
    tokenizer: tok,
    compaction: { atTokens: 700, keepLast: 1 },
  });
  for (const t of res.trajectories) {
    assert.deepEqual([t.endReason, t.reward], ["done", 1], tok.decode(t.steps[t.steps.length - 1].action));
    const names = questionNames(tok.decode(stepContext(t, 0)));
    const ledgers = summarySteps(t).map((i) => tok.decode(t.steps[i].action).replace(EOT, ""));
    assert.ok(ledgers.length >= 2, `${ledgers.length} summaries`);
    let before = 0;
    for (const text of ledgers) {
      const m = /^Found: (.*)\.$/.exec(text);
      assert.ok(m, text);
      const found = m[1].split(", ").map((p) => p.replace(/^\d+ /, ""));
      const order = found.map((n) => names.indexOf(n));
      assert.ok(
        order.every((k, i) => k >= 0 && (i === 0 || k > order[i - 1])),
        `in the question's order: ${text}`,
      );
      assert.ok(found.length > before, "each ledger carries the last one's entries and more");
      before = found.length;
    }
  }
});

test("a summary cut off by maxTotalTokens still compacts: the reopening closes it", async () => {
  let acted = 0;
  const engine = new ScriptedEngine(tok, (c) => {
    if (asksForSummary(c.text)) return `Summary: ${"noted ".repeat(200)}${EOT}`;
    const k = acted++;
    return (k < 4 ? hermesFormat.write({ name: "note", arguments: { k } }) : "<answer>done</answer>") + EOT;
  });
  const flow = new CompactionFlow<typeof row>(engine, chat, {
    maxTurns: 20,
    maxTotalTokens: 520,
    compaction: { atTokens: 400, keepLast: 1 },
  });
  const t = await run(flow);
  const [s] = summarySteps(t);
  const summary = t.steps[s];
  assert.equal(summary.stopReason, "length");
  assert.equal(stepContext(t, s).length + summary.action.length, 520, "the summary took all the room left");
  assert.deepEqual(summary.observation, [], "no room for the reopening after it: nothing appended");
  const ctx = t.steps[s + 1].context!;
  const head = [...stepContext(t, 0), ...summary.action, ...tok.encode(`${EOT}\n<|im_start|>assistant\n`)];
  assert.deepEqual(ctx.slice(0, head.length), head);
  assert.equal(t.endReason, "done");
  assert.equal(t.reward, 1);
});
