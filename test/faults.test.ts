/**
 * Fault injection (docs/reliability.md): tools that throw odd values, hang
 * ignoring their signal, fail late, answer with megabytes or with invalid
 * Unicode; a model writing malformed tool calls at random, or turns the chat
 * template cannot render; envs whose reset
 * fails inside a real training run; a NaN loss in a real run; a checkpoint
 * write that fails. Plain tool errors and a signal-honoring hang are in
 * agent-loop-errors.test.ts; the checkpoint writer alone in train-checkpoint.test.ts.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { z } from "zod";
import { AgentLoop } from "../src/agent/agent-loop.js";
import { chatSetup } from "../src/agent/chat-setup.js";
import { defineTool, DEFAULT_MAX_RESPONSE_CHARS, type AnyTool } from "../src/agent/tool.js";
import { ToolEnv } from "../src/agent/tool-env.js";
import { hermesFormat } from "../src/agent/formats/hermes.js";
import { rollout } from "../src/agent/rollout.js";
import { ASSISTANT_SENTINEL } from "../src/agent/observation-delta.js";
import { DEFAULT_CHAT_TEMPLATE } from "../src/model/chat-template.js";
import { TOOL_ERROR_KINDS } from "../src/agent/tool-runner.js";
import type { Trajectory } from "../src/agent/trajectory.js";
import { LocalEngine } from "../src/engine/local/local-engine.js";
import { Trainer } from "../src/train/trainer.js";
import { CheckpointError, latestCheckpoint, verifyCheckpoint } from "../src/train/checkpoint.js";
import type { Task, TaskRow } from "../src/tasks/types.js";
import { formatError } from "../src/util/errors.js";
import { Rng } from "../src/util/rng.js";
import { ScriptedEngine, assistantTurns, chatmlTokenizer } from "../src/testing/index.js";
import { toyTask } from "./fixtures/toy-task.js";
import { faultyToyEngines, toyConfig, toyEngines } from "./fixtures/train-toy.js";
import { snapshot } from "./fixtures/snapshot.js";
import { weights as hostWeights } from "./engine-internals.js";
import { tempDir } from "./helpers.js";

const tok = chatmlTokenizer();
const chat = chatSetup(tok);
const row = { prompt: [{ role: "user", content: "Go." }] };
const call = (name: string, args: Record<string, unknown> = {}) => hermesFormat.write({ name, arguments: args });

/** One turn calling `calls`, then an answer; returns the trajectory. */
async function oneTurn(tools: AnyTool[], calls: string[], maxTotalTokens = 16_000): Promise<Trajectory> {
  const engine = new ScriptedEngine(
    tok,
    (c) => (assistantTurns(c.text) === 0 ? calls.join("\n") : "<answer>ok</answer>") + "<|im_end|>",
  );
  return new AgentLoop(engine, chat, { maxTotalTokens }).run(new ToolEnv({ tools }), row);
}

const responses = (t: Trajectory) =>
  [...tok.decode(t.steps[0].observation).matchAll(/<tool_response>\n([\s\S]*?)\n<\/tool_response>/g)].map((m) => m[1]);

test("tools that throw non-errors, ignore their abort signal or reject after the timeout become error observations", async () => {
  const unhandled: unknown[] = [];
  const onUnhandled = (e: unknown) => unhandled.push(e);
  process.on("unhandledRejection", onUnhandled);
  try {
    const signals: { deaf?: AbortSignal; late?: AbortSignal } = {};
    let letLateFail!: () => void;
    const lateMayFail = new Promise<void>((r) => (letLateFail = r));
    let lateThrew = false;
    const evil = {
      toString: () => {
        throw new Error("toString exploded");
      },
    };
    const tools = [
      defineTool({
        name: "str",
        description: "Throws a string.",
        inputSchema: z.object({}),
        execute: () => {
          throw "plain string";
        },
      }),
      defineTool({
        name: "undef",
        description: "Rejects with undefined.",
        inputSchema: z.object({}),
        execute: () => Promise.reject(undefined),
      }),
      defineTool({
        name: "evil",
        description: "Throws an unprintable value.",
        inputSchema: z.object({}),
        execute: () => {
          throw evil;
        },
      }),
      // Never settles and never looks at its signal.
      defineTool({
        name: "deaf",
        description: "Hangs.",
        timeoutMs: 40,
        inputSchema: z.object({}),
        execute: (_, c) => ((signals.deaf = c.signal), new Promise<string>(() => {})),
      }),
      // Ignores the signal and rejects well after its timeout (only once the turn is over, when
      // the test lets it): nobody may be left holding that rejection.
      defineTool({
        name: "late",
        description: "Fails late.",
        timeoutMs: 30,
        inputSchema: z.object({}),
        execute: async (_, c) => {
          signals.late = c.signal;
          await lateMayFail;
          lateThrew = true;
          throw new Error("too late");
        },
      }),
    ];
    const t = await oneTurn(
      tools,
      ["str", "undef", "evil", "deaf", "late"].map((n) => call(n)),
    );
    // The turn waited for the timeouts only: "deaf" never settles and "late" is still pending
    // (it cannot fail before the test lets it), yet the turn is over and both signals fired.
    assert.equal(lateThrew, false, "the turn ended before the late tool's body did");
    assert.deepEqual([signals.deaf?.aborted, signals.late?.aborted], [true, true]);
    assert.deepEqual(
      t.steps[0].toolCalls.map((c) => c.error?.kind),
      ["tool_error", "tool_error", "tool_error", "timeout", "timeout"],
    );
    assert.deepEqual(responses(t), [
      "Error: tool 'str' failed: plain string",
      "Error: tool 'undef' failed: undefined",
      "Error: tool 'evil' failed: [object Object]",
      "Error: tool 'deaf' timed out after 40 ms.",
      "Error: tool 'late' timed out after 30 ms.",
    ]);
    assert.deepEqual([t.endReason, t.drift?.firstDiff], ["done", -1]);
    letLateFail();
    while (!lateThrew) await new Promise((r) => setImmediate(r));
    // Unhandled rejections are reported after the microtasks of the turn they happened in.
    for (let i = 0; i < 3; i++) await new Promise((r) => setImmediate(r));
    assert.deepEqual(unhandled, []);
  } finally {
    process.off("unhandledRejection", onUnhandled);
  }
});

test("megabyte responses and error messages are cut with a marker before they are tokenized", async (tc) => {
  const MB = 1 << 20;
  const tools = [
    defineTool({
      name: "flood",
      description: "5 MB of text.",
      inputSchema: z.object({}),
      execute: () => "y".repeat(5 * MB),
    }),
    defineTool({
      name: "floodObj",
      description: "3 MB in { text }.",
      maxResponseChars: 100,
      inputSchema: z.object({}),
      execute: () => ({ text: "z".repeat(3 * MB), reward: 0.5 }),
    }),
    defineTool({
      name: "floodErr",
      description: "Throws a 2 MB message.",
      maxResponseChars: 200,
      inputSchema: z.object({}),
      execute: () => {
        throw new Error("e".repeat(2 * MB));
      },
    }),
  ];
  // Count the tokenizer's work: the length of every text it is given during the turn.
  const encode = tc.mock.method(tok, "encode");
  const t = await oneTurn(tools, [call("flood"), call("floodObj"), call("floodErr")]);
  const encoded = encode.mock.calls.map((c) => c.arguments[0].length);
  encode.mock.restore();
  const [flood, obj, err] = t.steps[0].toolCalls;
  assert.equal(
    flood.text,
    "y".repeat(DEFAULT_MAX_RESPONSE_CHARS) + `\n[truncated: ${5 * MB - DEFAULT_MAX_RESPONSE_CHARS} more characters]`,
  );
  assert.equal(obj.text, "z".repeat(100) + `\n[truncated: ${3 * MB - 100} more characters]`);
  assert.equal(obj.reward, 0.5);
  // The error text the model reads and the message kept in the record are both bounded.
  assert.equal(err.error?.kind, "tool_error");
  assert.ok(
    err.text.length <= 200 + 40 &&
      err.text.startsWith("Error: tool 'floodErr' failed: eee") &&
      /\[truncated: \d+ more characters\]$/.test(err.text),
    err.text.slice(-60),
  );
  assert.ok(err.error!.message.length <= 200 + 40);
  assert.ok(
    t.steps[0].observation.length < 3 * DEFAULT_MAX_RESPONSE_CHARS,
    `observation: ${t.steps[0].observation.length} tokens`,
  );
  assert.equal(t.reward, 0.5);
  assert.equal(t.endReason, "done");
  // Nothing near a megabyte reached the tokenizer: each text it saw (the observation, the
  // re-rendered chat) holds the cut responses only. Uncut, one of them would be over 10 MB.
  assert.ok(encoded.length > 0);
  assert.ok(
    Math.max(...encoded) < 2 * DEFAULT_MAX_RESPONSE_CHARS,
    `the tokenizer was given texts of ${encoded.join(", ")} characters`,
  );
});

test("invalid Unicode from a tool becomes U+FFFD: the record, the observation and the re-rendered chat agree", async () => {
  const invalidUtf8 = Buffer.from([0x61, 0xff, 0xc3, 0x28, 0xe2, 0x82, 0x62]).toString("utf8"); // a, invalid, truncated sequences, b
  const outputs: [string, string][] = [
    ["lone high \ud800 here", "lone high \ufffd here"],
    ["lone low \udc00 here", "lone low \ufffd here"],
    ["reversed \udc00\ud800 pair", "reversed \ufffd\ufffd pair"],
    ["kept pair 😀", "kept pair 😀"],
    [invalidUtf8, invalidUtf8],
    ["ends on a high surrogate \ud83d", "ends on a high surrogate \ufffd"],
  ];
  const tools = outputs.map(([out], i) =>
    defineTool({ name: `u${i}`, description: "Odd text.", inputSchema: z.object({}), execute: () => out }),
  );
  const raw = defineTool({
    name: "thrower",
    description: "Throws odd text.",
    inputSchema: z.object({}),
    execute: () => {
      throw new Error("bad \udfff byte");
    },
  });
  const t = await oneTurn([...tools, raw], [...tools.map((tl) => call(tl.name)), call("thrower")]);
  const records = t.steps[0].toolCalls;
  assert.deepEqual(
    records.slice(0, outputs.length).map((r) => r.text),
    outputs.map(([, want]) => want),
  );
  assert.equal(records.at(-1)!.text, "Error: tool 'thrower' failed: bad \ufffd byte");
  assert.equal(records.at(-1)!.error!.message, "tool 'thrower' failed: bad \ufffd byte");
  assert.deepEqual(
    responses(t),
    records.map((r) => r.text),
    "the model reads exactly what was recorded",
  );
  for (const r of records)
    assert.equal(Buffer.from(r.text, "utf8").toString("utf8"), r.text, "well-formed: survives a UTF-8 round trip");
  assert.equal(t.drift?.firstDiff, -1, "the tokens equal the conversation re-rendered from the records");
  assert.deepEqual(
    JSON.parse(JSON.stringify(t)).steps[0].toolCalls.map((r: { text: string }) => r.text),
    records.map((r) => r.text),
  );
});

/** Tool-call-shaped garbage: a valid call mutated (cut, spliced, doubled), stray tags, or random token ids. */
function garbage(rng: Rng): string | { tokens: number[] } {
  const pick = <T>(xs: T[]) => xs[rng.int(xs.length)];
  const valid = call(
    pick(["echo", "echo", "nope"]),
    pick([{ t: "hi" }, { t: 3 }, {}, { t: "x", extra: [1, { y: null }] }]),
  );
  const bits = [
    "<tool_call>",
    "</tool_call>",
    "{",
    "}",
    '"',
    ":",
    ",",
    "[",
    "\\",
    "\n",
    '"name"',
    '"arguments"',
    "<answer>",
    "</answer>",
    "<|im_start|>",
    "<tool_response>",
    "null",
    "\ud800",
  ];
  switch (rng.int(6)) {
    case 0:
      return valid.slice(0, rng.int(valid.length)); // cut anywhere, e.g. an unclosed <tool_call>
    case 1: {
      const at = rng.int(valid.length);
      return valid.slice(0, at) + pick(bits) + valid.slice(at + rng.int(3));
    }
    case 2:
      return valid + "\n" + valid.replace("}", "");
    case 3:
      return Array.from({ length: 1 + rng.int(10) }, () => pick(bits)).join("");
    case 4:
      return {
        tokens: Array.from({ length: 1 + rng.int(24) }, () => rng.int(tok.vocabSize + 8)).filter(
          (id) => id < tok.vocabSize,
        ),
      };
    default:
      return valid;
  }
}

test("a model writing malformed tool calls at random never fails a trajectory; every call is answered and counted", async () => {
  const echo = defineTool({
    name: "echo",
    description: "Echoes.",
    inputSchema: z.object({ t: z.string() }),
    execute: ({ t }) => t,
  });
  const engine = new ScriptedEngine(tok, (c) => {
    const rng = new Rng(2024, c.index);
    const reply = garbage(rng);
    // Mostly keep the turn open (a call), sometimes close it the way a model would.
    return typeof reply === "string" && rng.next() < 0.5 ? reply + "<|im_end|>" : reply;
  });
  const rows = Array.from({ length: 24 }, () => row);
  const res = await rollout(engine, () => new ToolEnv({ tools: [echo] }), rows, {
    tokenizer: tok,
    n: 3,
    maxTurns: 4,
    maxTokensPerTurn: 64,
    maxTotalTokens: 2048,
    seed: 1,
  });
  assert.equal(res.failed.length, 0, JSON.stringify(res.failed.map((t) => t.error)));
  assert.equal(res.trajectories.length, 72);
  const records = res.trajectories.flatMap((t) => t.steps.flatMap((s) => s.toolCalls));
  const kinds = Object.fromEntries(TOOL_ERROR_KINDS.map((k) => [k, records.filter((r) => r.error?.kind === k).length]));
  assert.deepEqual(res.metrics.toolErrors, kinds);
  assert.equal(res.metrics.toolCalls, records.length);
  assert.ok(kinds.parse_error > 10 && kinds.unknown_tool > 0 && kinds.invalid_arguments > 0, JSON.stringify(kinds));
  assert.ok(
    records.some((r) => r.ok),
    "some calls survive the noise",
  );
  for (const t of res.trajectories) {
    assert.ok(["done", "max_turns", "max_total_tokens"].includes(t.endReason));
    for (const s of t.steps) {
      if (s.toolCalls.length === 0 || s.observation.length === 0) continue;
      // One response per call, in order: the model is told what went wrong with each.
      const obs = tok.decode(s.observation);
      assert.equal(obs.split("<tool_response>").length - 1, s.toolCalls.length, obs);
      for (const r of s.toolCalls) assert.ok(obs.includes(r.text), r.text);
      for (const r of s.toolCalls.filter((x) => !x.ok)) assert.match(r.text, /^Error: /);
    }
  }
});

test("an action the chat template cannot render after the conversation fails its own trajectory, not the rollout", async () => {
  // Like Llama 3.1's template: at most one tool call per assistant turn, checked when that turn is rendered as history.
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
  const one = call("echo", { t: "x" }),
    two = [one, call("echo", { t: "y" })].join("\n");
  const rows = [
    { prompt: [{ role: "user", content: "calm" }] },
    { prompt: [{ role: "user", content: "greedy" }] },
    { prompt: [{ role: "user", content: "echo the marker" }] },
  ];
  const engine = new ScriptedEngine(tok, (c) => {
    const turn = assistantTurns(c.text);
    if (turn >= 3) return "<answer>done</answer><|im_end|>";
    if (c.text.includes("greedy")) return (turn === 0 ? two : one) + "<|im_end|>";
    if (c.text.includes("marker")) return `${ASSISTANT_SENTINEL} ${one}<|im_end|>`; // text that collides with the observation-delta sentinel
    return one + "<|im_end|>";
  });
  const res = await rollout(engine, () => new ToolEnv({ tools: [echo] }), rows, { chat: strict, maxTurns: 4 });
  assert.deepEqual(
    res.trajectories.map((t) => t.rowIndex),
    [0],
  );
  assert.equal(res.trajectories[0].endReason, "done");
  assert.deepEqual(
    res.failed.map((t) => [t.rowIndex, t.error?.stage, t.error?.name]),
    [
      [1, "step", "ChatTemplateError"],
      [2, "step", "ChatTemplateError"],
    ],
  );
  assert.match(res.failed[0].error!.message, /one call per turn/);
  assert.match(res.failed[1].error!.message, /rendered it more than once/);
  assert.equal(res.metrics.failedAtStep, 2);
});

/** The toy task, with envs whose reset throws when `failReset(k)` for the k-th env made. */
function flakyTask(failReset: (k: number) => boolean, message: string): Task {
  const base = toyTask();
  let made = 0;
  return {
    ...base,
    makeEnv: (r: TaskRow) => {
      const env = base.makeEnv(r);
      if (failReset(made++))
        env.reset = () => {
          throw new Error(message);
        };
      return env;
    },
  };
}

const readMetrics = (out: string) =>
  readFileSync(join(out, "metrics.jsonl"), "utf8")
    .trim()
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Record<string, number>);

test("an env whose reset fails: the episode is left out, counted and logged, and the run goes on; if all fail the run stops naming the row", async () => {
  const out = tempDir(),
    log: string[] = [];
  // Rollout makes its envs in order (row-major: 2 rows x 4 samples per iteration): every third one fails.
  const t = await Trainer.open(toyConfig(2), {
    out,
    task: flakyTask((k) => k % 3 === 0, "search index unreachable"),
    engines: toyEngines(),
    log: (l) => log.push(l),
  });
  await t.run();
  await t.close();
  const m = readMetrics(out);
  assert.deepEqual(
    m.map((x) => x.iteration),
    [1, 2],
  );
  assert.deepEqual(
    m.map((x) => x.failed),
    [3, 3],
  ); // envs 0,3,6 then 9,12,15
  assert.equal(log.length, 2, log.join("\n"));
  assert.match(
    log[0],
    /^iteration 1: 3 of 8 episodes failed and were left out of the batch; first: row 1 of the batch \(toy #\d+\): env reset: search index unreachable$/,
  );
  assert.ok(existsSync(join(out, "checkpoints", "step-2")));

  const dead = tempDir();
  const t2 = await Trainer.open(toyConfig(2), {
    out: dead,
    task: flakyTask(() => true, "search index unreachable"),
    engines: toyEngines(),
  });
  await assert.rejects(t2.step(), {
    message:
      /^iteration 1: all 8 episodes failed; first: row 1 of the batch \(toy #\d+\): env reset: search index unreachable$/,
    hint: /^fix the task's environment, then start the run again \(no checkpoint was written yet/,
  });
  await t2.close();
  assert.ok(!existsSync(join(dead, "metrics.jsonl")), "nothing recorded for the failed iteration");
});

async function weights(policy: unknown): Promise<{ finite: boolean; checksum: number }> {
  const engine = policy as LocalEngine;
  let finite = true;
  for (const t of hostWeights(engine).values()) if (!t.data.every(Number.isFinite)) finite = false;
  return { finite, checksum: (await engine.weightChecksums())[0] };
}

test("a NaN loss in a real run: the step is skipped and counted, the weights stay finite and unchanged, the next step trains", async () => {
  const out = tempDir();
  const faulty = faultyToyEngines("nan-loss:1");
  const t = await Trainer.open(toyConfig(2), { out, task: toyTask(), engines: faulty.engines });
  faulty.attach(t);
  const before = await weights(t.policy);
  const m1 = await t.step();
  const after1 = await weights(t.policy);
  assert.equal(m1.skipped_steps, 1);
  assert.ok(
    Number.isFinite(m1.loss) && Number.isFinite(m1.grad_norm),
    "skipped steps stay out of the loss and grad-norm means",
  );
  assert.deepEqual(after1, before, "weights untouched by the skipped step");
  assert.equal((t.policy as LocalEngine).step, 0, "the optimizer did not count it");
  const m2 = await t.step();
  const after2 = await weights(t.policy);
  assert.equal(m2.skipped_steps, 0);
  assert.ok(after2.finite);
  assert.notEqual(after2.checksum, before.checksum, "iteration 2 updated the weights");
  assert.equal((t.policy as LocalEngine).step, 1);
  await t.close();
  // metrics.jsonl holds numbers only (a NaN would have been written as null).
  const m = readMetrics(out);
  assert.deepEqual(
    m.map((x) => x.skipped_steps),
    [1, 0],
  );
  for (const line of m)
    for (const [k, v] of Object.entries(line)) assert.ok(typeof v === "number" && Number.isFinite(v), `${k}: ${v}`);
  assert.equal(JSON.parse(readFileSync(join(out, "checkpoints", "step-2", "state.json"), "utf8")).optimizerSteps, 1);
});

test("a checkpoint write that fails: a clear error, the previous checkpoint intact and loadable, nothing half-written left", async () => {
  const out = tempDir();
  const faulty = faultyToyEngines("fail:checkpoint:2");
  const t = await Trainer.open(toyConfig(3), { out, task: toyTask(), engines: faulty.engines });
  faulty.attach(t);
  await t.step();
  const step1 = join(out, "checkpoints", "step-1");
  const saved = snapshot(step1);
  const err = await t.step().then(
    () => undefined,
    (e: unknown) => e,
  );
  await t.close();
  assert.ok(err instanceof CheckpointError, String(err));
  const line = formatError(err);
  assert.equal(line.split("\n").length, 1);
  assert.equal(
    line,
    `error: ${join(out, "checkpoints", "step-2")}: writing the checkpoint failed: ENOSPC: no space left on device, write (injected by the test); ` +
      `the newest earlier checkpoint, ${step1}, is untouched (hint: fix the cause (disk space, permissions), then continue the run with --resume)`,
  );
  assert.deepEqual(readdirSync(join(out, "checkpoints")), ["step-1"], "no step-2 and no temporary directory");
  assert.deepEqual(snapshot(step1), saved);
  assert.equal(verifyCheckpoint(step1), undefined);
  assert.equal(latestCheckpoint<{ iteration: number }>(out)?.state.iteration, 1);
  const engine = await LocalEngine.load(join(step1, "policy"), { workers: 0 });
  const lp = await engine.computeLogprobs([[1, 5, 9, 14]]);
  assert.ok(lp[0].slice(1).every((x) => Number.isFinite(x)));
  await engine.dispose();
});
