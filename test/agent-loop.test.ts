/**
 * The agent loop, driven by a scripted engine: a two-turn tool conversation
 * matches hand-built token sequences byte for byte, process rewards land on
 * the step that earned them, and the turn/token limits end trajectories.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { z } from "zod";
import { AgentLoop } from "../src/agent/agent-loop.js";
import { chatSetup } from "../src/agent/chat-setup.js";
import { defineTool } from "../src/agent/tool.js";
import { ToolEnv } from "../src/agent/tool-env.js";
import { llama3JsonFormat } from "../src/agent/formats/llama3.js";
import { finalTokens, stepContext } from "../src/agent/trajectory.js";
import {
  ScriptedEngine,
  assistantTurns,
  fakeLogprob,
  type Reply,
  chatmlTokenizer,
  llama3Tokenizer,
} from "../src/testing/index.js";

const tok = chatmlTokenizer();
const chat = chatSetup(tok);
const id = (t: string) => tok.tokenToId(t)!;
const EOT = id("<|im_end|>");

const calc = defineTool({
  name: "calc",
  description: "Multiplies two integers written as a*b.",
  inputSchema: z.object({ expression: z.string() }),
  execute: ({ expression }) => {
    const [a, b] = expression.split("*").map(Number);
    return { text: String(a * b), reward: 0.5 };
  },
});
const row = {
  prompt: [
    { role: "system", content: "Be brief." },
    { role: "user", content: "What is 6*7?" },
  ],
  reward_model: { ground_truth: "42" },
};
const makeEnv = () =>
  new ToolEnv({ tools: [calc], outcomeReward: ({ answer, groundTruth }) => (answer === groundTruth ? 1 : 0) });

const PROMPT =
  "<|im_start|>system\nBe brief.\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n" +
  "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n" +
  '{"type": "function", "function": {"name": "calc", "description": "Multiplies two integers written as a*b.", "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}, "required": ["expression"]}}}\n' +
  "</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n" +
  '<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call><|im_end|>\n' +
  "<|im_start|>user\nWhat is 6*7?<|im_end|>\n<|im_start|>assistant\n";

/** The call as sampled: "calc" spelled one character per token, which the tokenizer itself would not produce. */
const spelled = (s: string) => [...s].flatMap((c) => tok.encode(c));
const ACTION0 = [
  id("<tool_call>"),
  ...tok.encode('\n{"name": "'),
  ...spelled("calc"),
  ...tok.encode('", "arguments": {"expression": "6*7"}}\n'),
  id("</tool_call>"),
  EOT,
];
const OBS0 = [
  ...tok.encode("\n"),
  id("<|im_start|>"),
  ...tok.encode("user\n"),
  id("<tool_response>"),
  ...tok.encode("\n42\n"),
  id("</tool_response>"),
  EOT,
  ...tok.encode("\n"),
  id("<|im_start|>"),
  ...tok.encode("assistant\n"),
];
const ACTION1 = [id("<answer>"), ...tok.encode("42"), id("</answer>"), EOT];

function twoTurnEngine(action0: number[]) {
  return new ScriptedEngine(tok, (c): Reply => ({ tokens: assistantTurns(c.text) === 0 ? action0 : ACTION1 }));
}

test("two turns with a tool call match hand-built tokens byte for byte", async () => {
  assert.notDeepEqual(
    spelled("calc"),
    tok.encode("calc"),
    "precondition: the action is not the tokenizer's own encoding",
  );
  const engine = twoTurnEngine(ACTION0);
  const t = await new AgentLoop(engine, chat).run(makeEnv(), row);

  const expected = [...tok.encode(PROMPT), ...ACTION0, ...OBS0, ...ACTION1];
  assert.deepEqual(finalTokens(t), expected);
  assert.equal(
    tok.decode(finalTokens(t)),
    PROMPT +
      '<tool_call>\n{"name": "calc", "arguments": {"expression": "6*7"}}\n</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\n42\n</tool_response><|im_end|>\n<|im_start|>assistant\n<answer>42</answer><|im_end|>',
  );
  assert.deepEqual(t.steps[0].context, tok.encode(PROMPT));
  assert.deepEqual(
    [t.steps[0].action, t.steps[0].observation, t.steps[1].action, t.steps[1].observation],
    [ACTION0, OBS0, ACTION1, []],
  );
  assert.equal(t.steps[1].extendsPrevious, true);
  assert.equal(t.steps[1].context, undefined, "an extending step stores no context");
  // The engine saw exactly these contexts, and the sampling logprobs travel unchanged.
  assert.deepEqual(
    engine.calls.map((c) => c.prompt),
    [stepContext(t, 0), stepContext(t, 1)],
  );
  assert.deepEqual(t.steps[0].logprobs, ACTION0.map(fakeLogprob));
  assert.deepEqual(
    engine.calls.map((c) => c.params.stop),
    [[EOT], [EOT]],
  );

  assert.deepEqual(
    [t.endReason, t.reward, t.steps.map((s) => s.reward), t.steps.map((s) => s.done)],
    ["done", 1.5, [0.5, 1], [false, true]],
  );
  assert.deepEqual(
    t.steps[0].toolCalls.map((c) => [c.name, c.arguments, c.ok, c.text]),
    [["calc", { expression: "6*7" }, true, "42"]],
  );
  // Re-rendering the chat re-tokenizes "calc": the drift check sees it, the training tokens do not change.
  const rerendered = tok.encode(PROMPT + tok.decode(ACTION0)).slice(tok.encode(PROMPT).length);
  const k = ACTION0.findIndex((x, i) => x !== rerendered[i]);
  assert.deepEqual([t.drift?.firstDiff, t.drift!.differingTokens > 0], [tok.encode(PROMPT).length + k, true]);
});

test("an action in the template's own tokens shows no drift; compact JSON does", async () => {
  const canonical = [
    ...tok.encode('<tool_call>\n{"name": "calc", "arguments": {"expression": "6*7"}}\n</tool_call>'),
    EOT,
  ];
  assert.equal((await new AgentLoop(twoTurnEngine(canonical), chat).run(makeEnv(), row)).drift?.firstDiff, -1);
  // The template writes JSON with ", " and ": "; a model writing compact JSON drifts once the chat is re-rendered.
  const compact = [...tok.encode('<tool_call>\n{"name":"calc","arguments":{"expression":"6*7"}}\n</tool_call>'), EOT];
  const t = await new AgentLoop(twoTurnEngine(compact), chat).run(makeEnv(), row);
  assert.ok(t.drift!.firstDiff > tok.encode(PROMPT).length);
  assert.deepEqual(t.steps[0].action, compact);
});

test("process rewards land on the step whose calls earned them; the outcome on the last", async () => {
  const call = (e: string) => `<tool_call>\n{"name": "calc", "arguments": {"expression": "${e}"}}\n</tool_call>`;
  const script = [call("2*3"), `${call("1*1")}\n${call("2*2")}`, "no call here", "<answer>7</answer>"];
  const engine = new ScriptedEngine(tok, (c) => script[assistantTurns(c.text)] + "<|im_end|>");
  const t = await new AgentLoop(engine, chat).run(makeEnv(), row);
  // Turn 2 has no tool call, so the env is done there (no answer: outcome 0).
  assert.deepEqual(
    t.steps.map((s) => s.reward),
    [0.5, 1, 0],
  );
  assert.deepEqual(
    t.steps.map((s) => s.info.rewards),
    [
      { process: 0.5, outcome: 0 },
      { process: 1, outcome: 0 },
      { process: 0, outcome: 0 },
    ],
  );
  assert.deepEqual(
    t.steps.map((s) => s.toolCalls.map((c) => c.index)),
    [[0], [1, 2], []],
  );
  assert.deepEqual(
    t.steps[1].toolCalls.map((c) => [c.turn, c.text]),
    [
      [1, "1"],
      [1, "4"],
    ],
  );
  assert.equal(t.endReason, "done");
});

const forever = () =>
  new ScriptedEngine(
    tok,
    () => '<tool_call>\n{"name": "calc", "arguments": {"expression": "1*1"}}\n</tool_call><|im_end|>',
  );

test("maxTurns ends the trajectory; the last step carries no observation", async () => {
  const t = await new AgentLoop(forever(), chat, { maxTurns: 3 }).run(makeEnv(), row);
  assert.deepEqual(
    [t.endReason, t.steps.length, t.steps[2].observation, t.steps[2].toolCalls.length],
    ["max_turns", 3, [], 1],
  );
  assert.equal(t.drift?.firstDiff, -1);
});

test("per-turn and total token budgets reach the engine and end the trajectory", async () => {
  const engine = forever();
  const prompt = tok.encode(PROMPT).length;
  const per = 40,
    total = prompt + 3 * 40;
  const t = await new AgentLoop(engine, chat, { maxTokensPerTurn: per, maxTotalTokens: total }).run(makeEnv(), row);
  assert.equal(t.endReason, "max_total_tokens");
  engine.calls.forEach((c) => assert.equal(c.params.maxTokens, Math.min(per, total - c.prompt.length)));
  assert.ok(finalTokens(t).length <= total, "the last observation is dropped when no turn could follow");
  assert.deepEqual(t.steps[t.steps.length - 1].observation, []);
  const tooLong = await new AgentLoop(forever(), chat, { maxTotalTokens: prompt }).run(makeEnv(), row);
  assert.deepEqual([tooLong.endReason, tooLong.error?.stage, tooLong.steps.length], ["failed", "reset", 0]);
  assert.match(tooLong.error!.message, /at or over maxTotalTokens/);
});

test("an action cut by a stop string is closed by the delta before the observation", async () => {
  const engine = new ScriptedEngine(tok, (c) =>
    assistantTurns(c.text) === 0
      ? '<tool_call>\n{"name": "calc", "arguments": {"expression": "6*7"}}\n</tool_call> trailing text the stop cuts'
      : "<answer>42</answer><|im_end|>",
  );
  const t = await new AgentLoop(engine, chat, { stop: ["</tool_call>", EOT] }).run(makeEnv(), row);
  const a0 = t.steps[0].action;
  assert.equal(a0[a0.length - 1], id("</tool_call>"));
  assert.deepEqual(t.steps[0].observation, [EOT, ...OBS0]);
  assert.equal(t.drift?.firstDiff, -1, "closing the turn in the delta reproduces the template exactly");
});

test("Llama 3 JSON calls: results in role ipython, byte for byte", async () => {
  const ltok = llama3Tokenizer();
  const lid = (t: string) => ltok.tokenToId(t)!;
  const lchat = chatSetup(ltok);
  const call = [...ltok.encode('{"name": "calc", "parameters": {"expression": "6*7"}}'), lid("<|eot_id|>")];
  const answer = [...ltok.encode("<answer>42</answer>"), lid("<|eot_id|>")];
  const engine = new ScriptedEngine(ltok, (c) => ({
    tokens: c.text.includes("ipython<|end_header_id|>") ? answer : call,
  }));
  const env = new ToolEnv({ tools: [calc], format: llama3JsonFormat });
  const t = await new AgentLoop(engine, lchat).run(env, row);
  const obs = [
    lid("<|start_header_id|>"),
    ...ltok.encode("ipython"),
    lid("<|end_header_id|>"),
    ...ltok.encode("\n\n42"),
    lid("<|eot_id|>"),
    lid("<|start_header_id|>"),
    ...ltok.encode("assistant"),
    lid("<|end_header_id|>"),
    ...ltok.encode("\n\n"),
  ];
  assert.deepEqual([t.steps[0].action, t.steps[0].observation, t.steps[1].action], [call, obs, answer]);
  assert.deepEqual(engine.calls[1].prompt, [...t.steps[0].context!, ...call, ...obs]);
  assert.equal(t.drift?.firstDiff, -1);
});

test("an env that rebuilds the prompt ({ prompt }): each step is its own segment, sampled from that prompt alone", async () => {
  /** A counter world: the prompt shows the state and the last action; "inc" adds one; done at 2. */
  class Counter {
    private n = 0;
    private last = "none";
    private prompt() {
      return [
        { role: "system", content: "Reach 2." },
        { role: "user", content: `count ${this.n}; last action: ${this.last}; admissible: inc` },
      ];
    }
    reset() {
      return { prompt: this.prompt() };
    }
    step(a: { text: string }) {
      if (a.text === "inc") this.n++;
      this.last = a.text;
      return { observation: { prompt: this.prompt() }, reward: this.n === 2 ? 1 : 0, done: this.n === 2, info: {} };
    }
  }
  const engine = new ScriptedEngine(tok, (c) =>
    c.text.includes("last action: none") ? "nop<|im_end|>" : "inc<|im_end|>",
  );
  const t = await new AgentLoop(engine, chat, { maxTurns: 5 }).run(new Counter(), {});
  assert.equal(t.endReason, "done");
  assert.equal(t.steps.length, 3);
  const rendered = (user: string) =>
    tok.encode(`<|im_start|>system\nReach 2.<|im_end|>\n<|im_start|>user\n${user}<|im_end|>\n<|im_start|>assistant\n`);
  const users = ["count 0; last action: none", "count 0; last action: nop", "count 1; last action: inc"];
  t.steps.forEach((s, i) => {
    assert.equal(s.extendsPrevious, false, `step ${i} starts its own segment`);
    assert.deepEqual(s.context, rendered(`${users[i]}; admissible: inc`), `step ${i}'s prompt`);
    assert.deepEqual(s.observation, [], "nothing is appended after the action");
  });
  assert.deepEqual(
    engine.calls.map((c) => c.prompt),
    t.steps.map((s) => s.context),
    "each turn sampled from its rebuilt prompt alone",
  );
  assert.equal(t.reward, 1);
});
