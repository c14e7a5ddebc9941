/**
 * The recording gateway. Exactness: one conversation played by the built-in ToolEnv rollout and by
 * an agent of its own (the `openai` client against the gateway, running the same tool) gives the
 * same datums, token for token and weight for weight, with a scripted model driving both. Then the
 * faults: another model name, concurrent requests in one episode, requests after the episode ended,
 * a rewritten history (a new segment, with the reason), agents that throw, time out, never call the
 * model or return no finite reward (counted, logged, the rollout goes on), and a client that leaves
 * mid-request.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import OpenAI from "openai";
import { z } from "zod";
import { rollout } from "../src/agent/rollout.js";
import { defineTool, toolSchema } from "../src/agent/tool.js";
import { ToolEnv } from "../src/agent/tool-env.js";
import { hermesFormat } from "../src/agent/formats/hermes.js";
import { batchDatums } from "../src/rl/datums.js";
import { agentRollout, type Agent } from "../src/gateway/agent-rollout.js";
import { ScriptedEngine, assistantTurns, chatmlTokenizer } from "../src/testing/index.js";
import type { Trajectory } from "../src/agent/trajectory.js";
import type { Engine } from "../src/engine/types.js";

const tok = chatmlTokenizer();
type Row = { prompt: { role: string; content: string }[]; reward_model: { ground_truth: string } };
const rows: Row[] = ["alpha", "beta"].map((w) => ({
  prompt: [
    { role: "system", content: "Use the tool, then answer in <answer></answer>." },
    { role: "user", content: `Look up ${w}.` },
  ],
  reward_model: { ground_truth: w.toUpperCase() },
}));

const lookup = defineTool({
  name: "lookup",
  description: "Upper-cases a word.",
  inputSchema: z.object({ word: z.string() }),
  execute: async ({ word }) => word.toUpperCase(),
});

/** Two tool turns, then the answer: the same script whatever drives it. */
const script = () =>
  new ScriptedEngine(tok, (c) => {
    const word = /Look up (\w+)\./.exec(c.text)![1];
    return (
      (assistantTurns(c.text) < 2
        ? hermesFormat.write({ name: "lookup", arguments: { word } })
        : `<answer>${word.toUpperCase()}</answer>`) + "<|im_end|>"
    );
  });

const answerOf = (text: string | null) => /<answer>(.*?)<\/answer>/.exec(text ?? "")?.[1];

/** The user's own agent: a plain tool loop with the openai client, the same tool and the same reward. */
const openaiAgent: Agent<Row> = async (row, ctx) => {
  const client = new OpenAI({ baseURL: ctx.baseURL, apiKey: ctx.apiKey });
  const messages: OpenAI.ChatCompletionMessageParam[] = row.prompt.map((m) => ({
    role: m.role as "system" | "user",
    content: m.content,
  }));
  // The same function schema the tool env lists (toolSchema drops the JSON Schema's $schema).
  const tools: OpenAI.ChatCompletionTool[] = [toolSchema(lookup) as OpenAI.ChatCompletionTool];
  for (let turn = 0; turn < 5; turn++) {
    const res = await client.chat.completions.create({ model: ctx.model, messages, tools }, { signal: ctx.signal });
    const msg = res.choices[0].message;
    messages.push(msg);
    if (!msg.tool_calls?.length) return Number(answerOf(msg.content) === row.reward_model.ground_truth);
    for (const call of msg.tool_calls) {
      if (call.type !== "function") continue;
      const args = JSON.parse(call.function.arguments) as { word: string };
      messages.push({ role: "tool", tool_call_id: call.id, content: args.word.toUpperCase() });
    }
  }
  return 0;
};

const withoutTiming = (t: Trajectory) =>
  t.steps.map((s) => ({
    context: s.context,
    extendsPrevious: s.extendsPrevious,
    action: s.action,
    logprobs: s.logprobs,
    observation: s.observation,
  }));

const callsOf = (t: Trajectory) =>
  t.steps.map((s) => s.toolCalls.map((c) => ({ name: c.name, arguments: c.arguments, ok: c.ok, text: c.text })));

test("a gateway-recorded episode gives the built-in rollout's datums, token for token and weight for weight", async () => {
  const builtIn = await rollout(
    script(),
    () =>
      new ToolEnv({
        tools: [lookup],
        outcomeReward: ({ answer, groundTruth }) => Number(answer === groundTruth),
      }),
    rows,
    { n: 2, tokenizer: tok },
  );
  const recorded = await agentRollout(script(), openaiAgent, rows, { n: 2, tokenizer: tok });
  assert.equal(recorded.failed.length, 0, recorded.failed.map((t) => t.error?.message).join("; "));
  assert.equal(recorded.trajectories.length, 4);
  const a = builtIn.trajectories,
    b = recorded.trajectories;
  b.forEach((t, i) => {
    assert.equal(t.rowIndex, a[i].rowIndex);
    assert.equal(t.endReason, "done");
    assert.equal(t.steps.length, 3);
    assert.deepEqual(withoutTiming(t), withoutTiming(a[i]), `trajectory ${i}: steps`);
    // The tool calls too: names, arguments, and the results the agent sent back, ok or not.
    assert.deepEqual(callsOf(t), callsOf(a[i]), `trajectory ${i}: tool calls`);
    assert.ok(callsOf(t).flat().length > 0);
    assert.equal(t.drift?.firstDiff, -1, "no drift");
  });
  assert.deepEqual(
    b.map((t) => t.reward),
    a.map((t) => t.reward),
  );
  const da = batchDatums(a),
    db = batchDatums(b);
  assert.deepEqual(db.datums, da.datums, "datums: tokens, targets, weights, logprobs");
});

test("a request that rewrites the history starts a new segment, with the reason recorded", async () => {
  const agent: Agent<Row> = async (row, ctx) => {
    const client = new OpenAI({ baseURL: ctx.baseURL, apiKey: ctx.apiKey });
    await client.chat.completions.create({
      model: ctx.model,
      messages: [{ role: "user", content: row.prompt[1].content }],
    });
    // A summary in place of the history: not an extension.
    await client.chat.completions.create({
      model: ctx.model,
      messages: [{ role: "user", content: `Summary so far: nothing. ${row.prompt[1].content}` }],
    });
    return 0.5;
  };
  const res = await agentRollout(script(), agent, rows.slice(0, 1), { tokenizer: tok });
  const t = res.trajectories[0];
  assert.equal(t.steps.length, 2);
  assert.equal(t.steps[1].extendsPrevious, false, "a new segment");
  assert.match(res.segmentReasons.get(t.id)![0], /request has 1 messages, not more than the episode's 2/);
  assert.deepEqual(batchDatums([t]).datums.length, 2, "a new datum starts where the history was rewritten");
  assert.equal(t.reward, 0.5);
});

test("agents that fail are counted and logged, and the others are recorded", async () => {
  const lines: string[] = [];
  const agents: Record<string, Agent<Row>> = {
    throws: async () => {
      throw new Error("the agent crashed");
    },
    silent: async () => 1,
    nan: async (row, ctx) => (await openaiAgent(row, ctx), Number.NaN),
    slow: (_row, ctx) =>
      new Promise((_, reject) => ctx.signal.addEventListener("abort", () => reject(ctx.signal.reason))),
    fine: openaiAgent,
  };
  const pick: Agent<Row> = (row, ctx) => Object.values(agents)[ctx.sampleIndex](row, ctx);
  const res = await agentRollout(script(), pick, rows.slice(0, 1), {
    n: 5,
    tokenizer: tok,
    timeoutMs: 300,
    log: (l) => lines.push(l),
  });
  assert.equal(res.trajectories.length, 1);
  assert.equal(res.failed.length, 4);
  assert.equal(res.metrics.failed, 4);
  const msgs = res.failed.map((t) => t.error!.message);
  assert.match(msgs[0], /the agent crashed/);
  assert.match(msgs[1], /never called the model/);
  assert.match(msgs[2], /not a finite reward/);
  assert.match(msgs[3], /ran past its timeout of 300 ms/);
  assert.equal(lines.length, 4);
});

test("the gateway refuses another model, a second request in flight, requests after the episode, and n > 1", async () => {
  const slow = new ScriptedEngine(tok, () => "ok<|im_end|>", { delayMs: 100 });
  let client!: OpenAI,
    model = "";
  const agent: Agent<Row> = async (_row, ctx) => {
    client = new OpenAI({ baseURL: ctx.baseURL, apiKey: ctx.apiKey, maxRetries: 0 });
    model = ctx.model;
    const msg = [{ role: "user" as const, content: "hi" }];
    await assert.rejects(
      client.chat.completions.create({ model: "gpt-4o", messages: msg }),
      /404.*does not exist; this gateway serves 'policy'/,
    );
    await assert.rejects(client.chat.completions.create({ model, messages: msg, n: 2 }), /400.*n must be 1/);
    const both = await Promise.allSettled([
      client.chat.completions.create({ model, messages: msg }),
      client.chat.completions.create({ model, messages: msg }),
    ]);
    assert.deepEqual(
      both.map((s) => s.status),
      ["fulfilled", "rejected"],
    );
    assert.match(String((both[1] as PromiseRejectedResult).reason), /409.*one at a time/);
    const bad = new OpenAI({ baseURL: ctx.baseURL, apiKey: "wrong", maxRetries: 0 });
    await assert.rejects(bad.chat.completions.create({ model, messages: msg }), /401/);
    return 1;
  };
  const res = await agentRollout(slow, agent, rows.slice(0, 1), { tokenizer: tok });
  assert.equal(res.trajectories.length, 1, res.failed.map((t) => t.error?.message).join("; "));
  // The episode has ended: its URL is gone.
  await assert.rejects(
    client.chat.completions.create({ model, messages: [{ role: "user", content: "again" }] }),
    /ECONNREFUSED|Connection error|404/,
  );
});

test("streaming: the answer and its tool calls arrive as chunks the openai client assembles", async () => {
  const agent: Agent<Row> = async (row, ctx) => {
    const client = new OpenAI({ baseURL: ctx.baseURL, apiKey: ctx.apiKey });
    const stream = await client.chat.completions.create({
      model: ctx.model,
      messages: row.prompt.map((m) => ({ role: m.role as "user", content: m.content })),
      tools: [
        {
          type: "function",
          function: { name: "lookup", parameters: { type: "object", properties: { word: { type: "string" } } } },
        },
      ],
      stream: true,
    });
    let name = "",
      args = "";
    for await (const chunk of stream) {
      const call = chunk.choices[0]?.delta.tool_calls?.[0];
      if (call?.function?.name) name += call.function.name;
      if (call?.function?.arguments) args += call.function.arguments;
    }
    return Number(name === "lookup" && JSON.parse(args).word === "alpha");
  };
  const res = await agentRollout(script(), agent, rows.slice(0, 1), { tokenizer: tok });
  assert.equal(res.trajectories[0]?.reward, 1, res.failed.map((t) => t.error?.message).join("; "));
});

/** `engine`, with the i-th sample call's sequences stamped as policy version 10 + i (what train.async's policy does). */
function stampedVersions(engine: ScriptedEngine): Engine {
  let calls = 0;
  return {
    sample: async (prompt, params) => {
      const version = 10 + calls++;
      const res = await engine.sample(prompt, params);
      return { sequences: res.sequences.map((s) => ({ ...s, policyVersion: version })) };
    },
    computeLogprobs: () => engine.computeLogprobs(),
    forwardBackward: () => engine.forwardBackward(),
    optimStep: () => engine.optimStep(),
    save: () => engine.save(),
    load: () => engine.load(),
  };
}

test("each step keeps the policy version its sample carried (built-in loop and gateway); a datum the oldest", async () => {
  const env = () => new ToolEnv({ tools: [lookup], outcomeReward: () => 1 });
  const builtIn = await rollout(stampedVersions(script()), env, rows.slice(0, 1), { tokenizer: tok });
  const recorded = await agentRollout(stampedVersions(script()), openaiAgent, rows.slice(0, 1), { tokenizer: tok });
  for (const t of [builtIn.trajectories[0], recorded.trajectories[0]]) {
    assert.deepEqual(
      t.steps.map((s) => s.policyVersion),
      [10, 11, 12],
    );
    assert.deepEqual(
      batchDatums([t]).datums.map((d) => d.policyVersion),
      [10],
      "one segment: one datum, as old as its first step",
    );
  }
});
