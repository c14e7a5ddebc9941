/**
 * The loop when things go wrong or differ: every tool-call error kind in one
 * turn (run concurrently), envs that throw or break their contract, text and
 * token observations, and a flow that rewrites its context.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { z } from "zod";
import { AgentLoop } from "../src/agent/agent-loop.js";
import { AgentFlow, type ContextRewrite, type FlowState } from "../src/agent/agent-flow.js";
import { chatSetup } from "../src/agent/chat-setup.js";
import { defineTool } from "../src/agent/tool.js";
import { ToolEnv } from "../src/agent/tool-env.js";
import { hermesFormat } from "../src/agent/formats/hermes.js";
import type { Action, Env, StepResult } from "../src/agent/env.js";
import { finalTokens, segments, stepContext } from "../src/agent/trajectory.js";
import { DEFAULT_CHAT_TEMPLATE } from "../src/model/chat-template.js";
import { ScriptedEngine, assistantTurns, chatmlTokenizer } from "../src/testing/index.js";

const tok = chatmlTokenizer();
const chat = chatSetup(tok);
const EOT = tok.tokenToId("<|im_end|>")!;
const row = { prompt: [{ role: "user", content: "Go." }] };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** What the long-running tools did, in order: starts, ends and aborts. */
const events: string[] = [];
const tools = [
  defineTool({
    name: "nap",
    description: "Sleeps 100 ms.",
    inputSchema: z.object({ id: z.number() }),
    execute: async ({ id }) => {
      events.push(`nap ${id} starts`);
      await sleep(100);
      events.push(`nap ${id} ends`);
      return `slept ${id}`;
    },
  }),
  defineTool({
    name: "boom",
    description: "Throws.",
    inputSchema: z.object({}),
    execute: () => {
      throw new Error("no network");
    },
  }),
  defineTool({
    name: "hang",
    description: "Never answers.",
    timeoutMs: 60,
    inputSchema: z.object({}),
    execute: (_, c) => (
      events.push("hang starts"),
      new Promise((_r, reject) =>
        c.signal.addEventListener("abort", () => (events.push("hang aborted"), reject(c.signal.reason))),
      )
    ),
  }),
];

test("every tool-call error kind becomes an observation; calls of a turn run concurrently", async () => {
  const w = (name: string, args: object) => hermesFormat.write({ name, arguments: args as Record<string, unknown> });
  const turn0 = [
    w("nap", { id: 1 }),
    w("nap", { id: 2 }),
    '<tool_call>{"name": "nap", "arguments": {</tool_call>',
    w("search", { q: "x" }),
    w("nap", { id: "one" }),
    w("boom", {}),
    w("hang", {}),
  ].join("\n");
  const engine = new ScriptedEngine(
    tok,
    (c) => (assistantTurns(c.text) === 0 ? turn0 : "<answer>done</answer>") + "<|im_end|>",
  );
  events.length = 0;
  const t = await new AgentLoop(engine, chat).run(new ToolEnv({ tools }), row);
  const s = t.steps[0];
  assert.deepEqual(
    s.toolCalls.map((c) => c.error?.kind ?? "ok"),
    ["ok", "ok", "parse_error", "unknown_tool", "invalid_arguments", "tool_error", "timeout"],
  );
  assert.deepEqual(s.info.toolErrors, {
    parse_error: 1,
    unknown_tool: 1,
    invalid_arguments: 1,
    timeout: 1,
    tool_error: 1,
  });
  assert.deepEqual(t.metrics.toolErrors, s.info.toolErrors);
  // Two 100 ms naps and a 60 ms timeout ran concurrently: all three started before any ended,
  // and the hang timed out while both naps were still asleep (in turn, the naps would end first).
  assert.deepEqual(events, ["nap 1 starts", "nap 2 starts", "hang starts", "hang aborted", "nap 1 ends", "nap 2 ends"]);
  const obs = tok.decode(s.observation);
  const blocks = [...obs.matchAll(/<tool_response>\n([\s\S]*?)\n<\/tool_response>/g)].map((m) => m[1]);
  assert.deepEqual(blocks.slice(0, 2), ["slept 1", "slept 2"]);
  assert.match(blocks[2], /^Error: could not parse tool call: malformed JSON/);
  assert.equal(blocks[3], "Error: unknown tool 'search'. Available tools: nap, boom, hang.");
  assert.match(
    blocks[4],
    /^Error: invalid arguments for tool 'nap': id: Invalid input: expected number, received string\.$/,
  );
  assert.equal(blocks[5], "Error: tool 'boom' failed: no network");
  assert.equal(blocks[6], "Error: tool 'hang' timed out after 60 ms.");
  assert.deepEqual([t.endReason, t.steps.length], ["done", 2]);
});

/** A tiny env whose behavior per turn is given by a function. */
function scriptedEnv(
  step: (a: Action) => StepResult | Promise<StepResult>,
  reset: () => ReturnType<Env["reset"]> = () => ({ messages: row.prompt }),
): Env {
  return { reset, step };
}
const answerEngine = () => new ScriptedEngine(tok, (c) => `turn ${assistantTurns(c.text)}<|im_end|>`);

test("an env that throws or breaks its contract fails its trajectory with the reason", async () => {
  const loop = new AgentLoop(answerEngine(), chat);
  const threw = await loop.run(
    scriptedEnv(() => {
      throw new TypeError("db closed");
    }),
    row,
  );
  assert.deepEqual(
    [threw.endReason, threw.error],
    ["failed", { stage: "step", name: "TypeError", message: "db closed" }],
  );
  const atReset = await loop.run(
    scriptedEnv(
      () => ({ observation: { text: "" }, reward: 0, done: true, info: {} }),
      () => {
        throw new Error("no such row");
      },
    ),
    row,
  );
  assert.deepEqual(atReset.error, { stage: "reset", name: "Error", message: "no such row" });
  const nan = await loop.run(
    scriptedEnv(() => ({ observation: { text: "" }, reward: NaN, done: false, info: {} })),
    row,
  );
  assert.match(nan.error!.message, /reward must be a finite number, got NaN/);
  const two = await loop.run(
    scriptedEnv(() => ({ observation: { text: "a", tokens: [1] } as never, reward: 0, done: false, info: {} })),
    row,
  );
  assert.match(two.error!.message, /exactly one of messages, text, tokens, prompt; got text, tokens/);
  // Steps before the failure are kept for inspection.
  let n = 0;
  const late = await loop.run(
    scriptedEnv(() => {
      if (n++ === 1) throw new Error("late");
      return { observation: { messages: [{ role: "user", content: "more" }] }, reward: 0.5, done: false, info: {} };
    }),
    row,
  );
  assert.deepEqual([late.endReason, late.steps.length, late.error?.message], ["failed", 1, "late"]);
});

test("text and token observations are appended verbatim", async () => {
  const engine = answerEngine();
  let turn = 0;
  const env = scriptedEnv(() => {
    turn++;
    if (turn === 1)
      return {
        observation: { text: "<|im_end|>\n<|im_start|>user\nraw<|im_end|>\n<|im_start|>assistant\n" },
        reward: 0,
        done: false,
        info: {},
      };
    if (turn === 2) return { observation: { tokens: [EOT, 7, 8, 9] }, reward: 0, done: false, info: {} };
    return { observation: { messages: [] }, reward: 1, done: true, info: {} };
  });
  // The action stops on <|im_end|>: the text observation repeats it, as this env chose to.
  const t = await new AgentLoop(engine, chat).run(env, row);
  assert.deepEqual(
    t.steps[0].observation,
    tok.encode("<|im_end|>\n<|im_start|>user\nraw<|im_end|>\n<|im_start|>assistant\n"),
  );
  assert.deepEqual(t.steps[1].observation, [EOT, 7, 8, 9]);
  assert.deepEqual(engine.calls[2].prompt, stepContext(t, 2));
  assert.equal(t.drift, undefined, "a conversation with raw observations has no messages to re-render");
});

/** Keeps only the newest tool response; older ones become "[dropped]". */
class DropOldResponses extends AgentFlow {
  protected prepareContext(s: FlowState): ContextRewrite | undefined {
    if (!s.messages) return undefined;
    const lastTool = s.messages.map((m) => m.role).lastIndexOf("tool");
    const old = s.messages.some((m, i) => m.role === "tool" && i < lastTool && m.content !== "[dropped]");
    if (!old) return undefined;
    return {
      messages: s.messages.map((m, i) => (m.role === "tool" && i < lastTool ? { ...m, content: "[dropped]" } : m)),
    };
  }
}

test("a flow that rewrites its context starts a new segment with the context stored", async () => {
  const echo = defineTool({
    name: "echo",
    description: "Echoes.",
    inputSchema: z.object({ t: z.string() }),
    execute: ({ t }) => t.repeat(3),
  });
  const script = ["a", "b", "c"].map((x) => hermesFormat.write({ name: "echo", arguments: { t: x } }));
  const engine = new ScriptedEngine(
    tok,
    (c) => (script[assistantTurns(c.text)] ?? "<answer>x</answer>") + "<|im_end|>",
  );
  const t = await new DropOldResponses(engine, chat).run(new ToolEnv({ tools: [echo] }), row);
  assert.deepEqual(segments(t), [[0, 1], [2], [3]]);
  assert.deepEqual(
    t.steps.map((s) => s.extendsPrevious),
    [false, true, false, false],
  );
  const ctx2 = tok.decode(stepContext(t, 2));
  assert.ok(
    ctx2.includes("<tool_response>\n[dropped]\n</tool_response>") &&
      ctx2.includes("<tool_response>\nbbb\n</tool_response>") &&
      !ctx2.includes("aaa"),
  );
  assert.deepEqual(
    engine.calls.map((c) => c.prompt),
    t.steps.map((_, i) => stepContext(t, i)),
  );
  assert.equal(t.drift?.firstDiff, -1);
  assert.ok(finalTokens(t).length > 0);
});

test("an env whose close throws fails its trajectory at stage close", async () => {
  const env = {
    ...scriptedEnv(() => ({ observation: { messages: [] }, reward: 1, done: true, info: {} })),
    close: () => {
      throw new Error("leaked handle");
    },
  };
  const t = await new AgentLoop(answerEngine(), chat).run(env, row);
  assert.deepEqual(
    [t.endReason, t.error, t.steps.length],
    ["failed", { stage: "close", name: "Error", message: "leaked handle" }, 1],
  );
});

test("a template that refuses the re-rendered chat leaves a drift error, not a failed rollout", async () => {
  // Like Llama 3.1's template: one tool call per assistant message at most.
  const strict = chatSetup(tok, {
    template: DEFAULT_CHAT_TEMPLATE.replace(
      "{%- for call in message.tool_calls -%}",
      '{%- if message.tool_calls | length > 1 -%}{{ raise_exception("one call per turn") }}{%- endif -%}{%- for call in message.tool_calls -%}',
    ),
  });
  const echo = defineTool({
    name: "echo",
    description: "Echoes.",
    inputSchema: z.object({ t: z.string() }),
    execute: ({ t }) => t,
  });
  const two = ["a", "b"].map((x) => hermesFormat.write({ name: "echo", arguments: { t: x } })).join("\n");
  const engine = new ScriptedEngine(
    tok,
    (c) => (assistantTurns(c.text) === 0 ? two : "<answer>ab</answer>") + "<|im_end|>",
  );
  const t = await new AgentLoop(engine, strict).run(new ToolEnv({ tools: [echo] }), row);
  assert.deepEqual([t.endReason, t.drift], ["done", undefined]);
  assert.match(t.driftError!, /one call per turn/);
});
