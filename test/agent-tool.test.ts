/** Tools: definition checks, JSON Schema, and every way a call can fail becoming its own observation. */
import { test } from "node:test";
import assert from "node:assert/strict";
import { z } from "zod";
import { defineTool, toolSchema, truncateResponse, DEFAULT_TOOL_TIMEOUT_MS, type AnyTool } from "../src/agent/tool.js";
import { countToolErrors, runToolCall, type CallContext } from "../src/agent/tool-runner.js";
import type { ParsedToolCall } from "../src/agent/formats/types.js";
import { InputError } from "../src/util/errors.js";

const add = defineTool({
  name: "add",
  description: "Adds two numbers.",
  inputSchema: z.object({ a: z.number(), b: z.number().describe("second term") }),
  execute: async ({ a, b }) => ({ text: String(a + b), reward: 0.25, metadata: { exact: true } }),
});
const echo = defineTool({
  name: "echo",
  description: "Echoes text.",
  inputSchema: z.object({ text: z.string() }),
  execute: ({ text }) => text,
});
const tools = new Map<string, AnyTool>([
  [add.name, add],
  [echo.name, echo],
]);
const ctx: CallContext = {
  row: { id: 7 },
  groundTruth: "42",
  callIndex: 3,
  turn: 1,
  usage: "Write <tool_call>...</tool_call>.",
};
const ok = (name: string, args: Record<string, unknown>): ParsedToolCall => ({
  ok: true,
  name,
  arguments: args,
  raw: `<${name}>`,
});

test("defineTool: defaults, and the JSON Schema the template lists", () => {
  assert.equal(add.timeoutMs, DEFAULT_TOOL_TIMEOUT_MS);
  assert.deepEqual(toolSchema(add), {
    type: "function",
    function: {
      name: "add",
      description: "Adds two numbers.",
      parameters: {
        type: "object",
        properties: { a: { type: "number" }, b: { type: "number", description: "second term" } },
        required: ["a", "b"],
      },
    },
  });
});

test("defineTool: bad definitions fail at definition with the field named", () => {
  const base = { name: "t", description: "d", inputSchema: z.object({}), execute: () => "" };
  assert.throws(
    () => defineTool({ ...base, name: "has space" }),
    (e: unknown) => e instanceof InputError && /name must match/.test(e.message),
  );
  assert.throws(() => defineTool({ ...base, description: " " }), /description/);
  assert.throws(() => defineTool({ ...base, timeoutMs: 0 }), /timeoutMs/);
  assert.throws(() => defineTool({ ...base, maxResponseChars: 1.5 }), /maxResponseChars/);
  assert.throws(() => defineTool({ ...base, inputSchema: z.string() }), /must be an object schema/);
  // z.strictObject refuses unknown keys; the schema says so to the model
  const strict = defineTool({ ...base, inputSchema: z.strictObject({ a: z.string() }) });
  assert.equal(
    (toolSchema(strict).function.parameters as { additionalProperties?: boolean }).additionalProperties,
    false,
  );
});

test("a valid call runs with its context and keeps reward and metadata", async () => {
  let seen: unknown;
  const spy = defineTool({
    name: "spy",
    description: "Records its context.",
    inputSchema: z.object({}),
    execute: (_, c) => ((seen = c), "ok"),
  });
  const r = await runToolCall(ok("spy", {}), new Map([["spy", spy as AnyTool]]), ctx);
  assert.equal(r.ok, true);
  const c = seen as { row: unknown; groundTruth: unknown; callIndex: number; turn: number; signal: AbortSignal };
  assert.deepEqual([c.row, c.groundTruth, c.callIndex, c.turn, c.signal.aborted], [{ id: 7 }, "42", 3, 1, false]);

  const sum = await runToolCall(ok("add", { a: 2, b: 40 }), tools, ctx);
  assert.deepEqual(
    [sum.ok, sum.text, sum.reward, sum.metadata, sum.index, sum.turn, sum.name],
    [true, "42", 0.25, { exact: true }, 3, 1, "add"],
  );
});

test("each error kind becomes its own observation text", async () => {
  const cases: [ParsedToolCall, AnyTool[] | undefined, string, RegExp][] = [
    [
      { ok: false, raw: "<tool_call>{</tool_call>", error: "malformed JSON: Unexpected end" },
      undefined,
      "parse_error",
      /^Error: could not parse tool call: malformed JSON: Unexpected end\. Write <tool_call>/,
    ],
    [
      ok("serch", { q: "x" }),
      undefined,
      "unknown_tool",
      /^Error: unknown tool 'serch'\. Available tools: add, echo\.$/,
    ],
    [
      ok("add", { a: "2", b: 3 }),
      undefined,
      "invalid_arguments",
      /^Error: invalid arguments for tool 'add': a: Invalid input: expected number, received string\.$/,
    ],
    [ok("add", {}), undefined, "invalid_arguments", /a: .*; b: /],
    [
      ok("boom", {}),
      [
        defineTool({
          name: "boom",
          description: "Throws.",
          inputSchema: z.object({}),
          execute: () => {
            throw new Error("disk on fire");
          },
        }),
      ],
      "tool_error",
      /^Error: tool 'boom' failed: disk on fire$/,
    ],
    [
      ok("bad", {}),
      [
        defineTool({
          name: "bad",
          description: "Bad reward.",
          inputSchema: z.object({}),
          execute: () => ({ text: "x", reward: NaN }),
        }),
      ],
      "tool_error",
      /non-finite reward/,
    ],
    [
      ok("nul", {}),
      [
        defineTool({
          name: "nul",
          description: "Returns null.",
          inputSchema: z.object({}),
          execute: () => null as unknown as string,
        }),
      ],
      "tool_error",
      /returned null; expected a string/,
    ],
  ];
  for (const [call, own, kind, text] of cases) {
    const set = own ? new Map(own.map((t) => [t.name, t] as [string, AnyTool])) : tools;
    const r = await runToolCall(call, set, ctx);
    assert.equal(r.ok, false, kind);
    assert.equal(r.error?.kind, kind);
    assert.match(r.text, text);
    assert.equal(countToolErrors([r])[kind as keyof ReturnType<typeof countToolErrors>], 1);
  }
});

test("a timeout fires, aborts the signal, and does not wait for the tool", async (t) => {
  // A mocked clock: the 50 ms timeout is counted in ticks, not waited for.
  t.mock.timers.enable({ apis: ["setTimeout"] });
  const turns = () => new Promise((r) => setImmediate(r)); // setImmediate is not mocked
  let signal: AbortSignal | undefined;
  let bodySettled = false;
  const slow = defineTool({
    name: "slow",
    description: "Never answers.",
    timeoutMs: 50,
    inputSchema: z.object({}),
    execute: (_, c) => {
      signal = c.signal;
      // Never settles: the runner can only return by giving up on it.
      return new Promise<string>(() => {}).finally(() => (bodySettled = true));
    },
  });
  let record: Awaited<ReturnType<typeof runToolCall>> | undefined;
  const pending = runToolCall(ok("slow", {}), new Map([["slow", slow as AnyTool]]), ctx).then((r) => (record = r));
  await turns();
  assert.equal(signal?.aborted, false, "the tool is running and its signal is not aborted yet");
  t.mock.timers.tick(49);
  await turns();
  assert.equal(record, undefined, "no timeout before 50 ms");
  assert.equal(signal!.aborted, false);
  t.mock.timers.tick(1);
  const r = await pending;
  assert.equal(r.error?.kind, "timeout");
  assert.equal(r.text, "Error: tool 'slow' timed out after 50 ms.");
  assert.equal(signal!.aborted, true);
  assert.match(String((signal!.reason as Error).message), /^tool 'slow' timed out after 50 ms$/);
  assert.equal(bodySettled, false, "the runner returned while the tool's own body was still pending");
});

test("long responses are truncated with a marker", async () => {
  const long = defineTool({
    name: "long",
    description: "Talks.",
    maxResponseChars: 10,
    inputSchema: z.object({}),
    execute: () => "0123456789abcdef",
  });
  const r = await runToolCall(ok("long", {}), new Map([["long", long as AnyTool]]), ctx);
  assert.equal(r.text, "0123456789\n[truncated: 6 more characters]");
  assert.equal(truncateResponse("short", 10), "short");
  // never splits a surrogate pair: "😀" is two UTF-16 units
  assert.equal(truncateResponse("abc😀def", 4), "abc\n[truncated: 5 more characters]");
});
