/**
 * `agent-r1 chat`: piped questions on a tiny random model give a transcript
 * with each turn and one answer line per question (exit 0); a scripted engine
 * shows a tool call and its response live; the formatter labels and colors;
 * a missing model directory is one error line.
 */
import { test, before } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import { chatSetup } from "../src/agent/chat-setup.js";
import type { Trajectory } from "../src/agent/trajectory.js";
import type { ToolCallRecord } from "../src/agent/tool-runner.js";
import { answerLines, toolCallLines, trajectoryLines } from "../src/cli/chat-view.js";
import { chatSession, questionRow, templateRow } from "../src/cli/commands/chat.js";
import type { CommandIO } from "../src/cli/command.js";
import { runCli } from "../src/cli/main.js";
import { getTask } from "../src/tasks/index.js";
import { ScriptedEngine, assistantTurns, chatmlTokenizer } from "../src/testing/index.js";
import { captureIO, tempDir } from "./helpers.js";

let model: string;
before(async () => {
  model = join(tempDir(), "tiny");
  const io = captureIO();
  assert.equal(await runCli(["init-model", "--preset", "tiny", "--out", model], io), 0, io.stderr.join("\n"));
});

/** An io whose stdin yields lines one at a time, as a pipe would (not a terminal). */
function linesIO(lines: string[]): CommandIO & { stdout: string[]; stderr: string[] } {
  const io = captureIO();
  return {
    ...io,
    readStdin: async () => {
      throw new Error("chat should read line by line when it can");
    },
    async *readLines() {
      for (const l of lines) yield l;
    },
  };
}

test("piped questions: each turn is shown and every question gets an answer line", async () => {
  const io = linesIO(["What is 2+3?", "", "What is 7 times 6?"]);
  const code = await runCli(
    [
      "chat",
      "--model",
      model,
      "--task",
      "calc",
      "--max-turns",
      "2",
      "--max-tokens-per-turn",
      "8",
      "--seed",
      "1",
      "--temperature",
      "1",
    ],
    io,
  );
  assert.equal(code, 0, io.stderr.join("\n"));
  assert.deepEqual(io.stderr, []);
  const out = io.stdout.join("\n");
  // Questions echoed (stdin is not a terminal), in order, the blank line skipped.
  assert.deepEqual(
    io.stdout.filter((l) => l.startsWith("you> ")),
    ["you> What is 2+3?", "you> What is 7 times 6?"],
  );
  assert.equal(io.stdout.filter((l) => l.startsWith("answer> ")).length, 2, out);
  const turns = io.stdout.filter((l) => l.startsWith("assistant> "));
  assert.ok(turns.length >= 2 && turns.length <= 4, out);
  // Each question's block: you>, then at least one assistant turn, then the answer.
  const firstAnswer = io.stdout.findIndex((l) => l.startsWith("answer> "));
  assert.ok(
    io.stdout.slice(0, firstAnswer).some((l) => l.startsWith("assistant> ")),
    out,
  );
  assert.ok(!/\x1b\[/.test(out), "no color when the output is not a terminal");
});

test("without a line reader, chat splits the whole of stdin", async () => {
  const io = captureIO("first question\nsecond question\n");
  assert.equal(
    await runCli(
      ["chat", "--model", model, "--task", "multihop", "--max-turns", "1", "--max-tokens-per-turn", "4"],
      io,
    ),
    0,
    io.stderr.join("\n"),
  );
  assert.equal(io.stdout.filter((l) => l.startsWith("answer> ")).length, 2);
  assert.deepEqual(
    io.stdout.filter((l) => l.startsWith("you> ")),
    ["you> first question", "you> second question"],
  );
});

test("a scripted model's tool call and the tool's response are shown live, then the answer", async () => {
  const tok = chatmlTokenizer();
  const task = getTask("calc");
  const engine = new ScriptedEngine(tok, (c) =>
    assistantTurns(c.text) === 0
      ? '<think>multiply</think>\n<tool_call>\n{"name": "calculator", "arguments": {"expression": "6*7"}}\n</tool_call><|im_end|>'
      : "<answer>42</answer><|im_end|>",
  );
  const lines: string[] = [];
  async function* questions() {
    yield "What is 6 times 7?";
  }
  const n = await chatSession(engine, chatSetup(tok), task, questions(), (l) => lines.push(l), {
    temperature: 0,
    maxTurns: 4,
    maxTokensPerTurn: 64,
    maxTotalTokens: 4096,
    color: false,
    echo: true,
  });
  assert.equal(n, 1);
  assert.deepEqual(lines, [
    "you> What is 6 times 7?",
    "assistant> <think>multiply</think>",
    "           <tool_call>",
    '           {"name": "calculator", "arguments": {"expression": "6*7"}}',
    "           </tool_call>",
    'tool call> calculator {"expression":"6*7"}',
    "tool> 42",
    "assistant> <answer>42</answer>",
    "answer> 42",
    "",
  ]);
  // The model saw the task's own system prompt and tools, with the question as the user message.
  const row = questionRow(templateRow(task), "What is 6 times 7?", 0);
  assert.equal(row.prompt[0].content, templateRow(task).prompt[0].content);
  assert.ok(
    engine.calls[0].text.includes(row.prompt[0].content) && engine.calls[0].text.includes('"name": "calculator"'),
  );
  assert.ok(engine.calls[0].text.includes("<|im_start|>user\nWhat is 6 times 7?<|im_end|>"));
});

test("the formatter: failed calls, colors, episodes without an answer", () => {
  const call: ToolCallRecord = {
    index: 0,
    turn: 0,
    name: "search",
    arguments: { query: "Kalomi" },
    raw: "",
    ok: false,
    error: { kind: "timeout", message: "x" },
    text: "Error: tool 'search' timed out after 30000 ms.",
    startedAt: 0,
    durationMs: 1,
  };
  assert.deepEqual(toolCallLines(call, false), [
    'tool call> search {"query":"Kalomi"}',
    "tool> Error: tool 'search' timed out after 30000 ms.",
  ]);
  const colored = toolCallLines(call, true);
  assert.equal(colored[0], '\x1b[33mtool call>\x1b[0m search {"query":"Kalomi"}');
  assert.equal(colored[1], "\x1b[31mtool>\x1b[0m Error: tool 'search' timed out after 30000 ms.");
  const unparsed: ToolCallRecord = {
    ...call,
    name: null,
    arguments: null,
    raw: "<tool_call>{oops</tool_call>",
    text: "Error: could not parse tool call",
  };
  assert.equal(toolCallLines(unparsed, false)[0], "tool call> (unreadable call) <tool_call>{oops</tool_call>");

  const step = (info: Record<string, unknown>, toolCalls: ToolCallRecord[] = []) => ({
    extendsPrevious: false,
    action: [],
    logprobs: [],
    stopReason: "stop" as const,
    observation: [],
    reward: 0,
    done: true,
    toolCalls,
    info,
    timing: { sampleMs: 0, envMs: 0 },
  });
  const base = {
    id: "t",
    rowIndex: 0,
    sampleIndex: 0,
    reward: 0,
    metrics: {
      turns: 1,
      actionTokens: 0,
      observationTokens: 0,
      finalTokens: 0,
      toolCalls: 0,
      toolErrors: {} as never,
      wallMs: 0,
    },
  };
  const capped: Trajectory = { ...base, steps: [step({ toolCalls: [] }, [call]), step({})], endReason: "max_turns" };
  assert.deepEqual(answerLines(capped, false), ["answer> (none: stopped after 2 turns (--max-turns))"]);
  const noTag: Trajectory = { ...base, steps: [step({ answer: null })], endReason: "done" };
  assert.match(answerLines(noTag, false)[0], /^answer> \(none: the model ended its turn without an <answer>/);
  const failed: Trajectory = {
    ...base,
    steps: [],
    endReason: "failed",
    error: { stage: "step", name: "Error", message: "env broke" },
  };
  assert.deepEqual(answerLines(failed, false), ["error> the episode failed: step: Error: env broke"]);
  assert.deepEqual(trajectoryLines(capped, ["<tool_call>...</tool_call>", "thinking\nmore"], false), [
    "assistant> <tool_call>...</tool_call>",
    'tool call> search {"query":"Kalomi"}',
    "tool> Error: tool 'search' timed out after 30000 ms.",
    "assistant> thinking",
    "           more",
    "answer> (none: stopped after 2 turns (--max-turns))",
  ]);
});

test("a missing model directory (exit 1) or a bad flag (exit 2) is one error line", async () => {
  for (const [args, pattern, code] of [
    [["chat", "--model", join(tempDir(), "nope"), "--task", "calc"], /^error: .*nope.*not found/, 1],
    [["chat", "--task", "calc"], /^error: chat: --model is required/, 2],
    [["chat", "--model", model, "--task", "poetry"], /^error: unknown task 'poetry'/, 2],
    [
      ["chat", "--model", model, "--task", "calc", "--max-turns", "0"],
      /^error: chat: --max-turns must be a positive integer/,
      2,
    ],
  ] as [string[], RegExp, number][]) {
    const io = linesIO(["hello"]);
    assert.equal(await runCli(args, io), code, args.join(" "));
    assert.equal(io.stderr.length, 1, io.stderr.join("\n"));
    assert.match(io.stderr[0], pattern);
    assert.deepEqual(io.stdout, []);
  }
});
