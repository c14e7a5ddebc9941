import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import OpenAI from "openai";
import { initModel } from "../src/model/init-model.js";
import { LocalEngine } from "../src/engine/local/local-engine.js";
import { startServer, type RunningServer } from "../src/serve/server.js";
import { extractToolCalls } from "../src/serve/tool-calls.js";
import { decodeSequence } from "../src/serve/output-text.js";
import type { ServedEngine } from "../src/serve/context.js";
import { topAlternatives, drawToken, keptTokens, logSoftmax } from "../src/engine/sampling.js";
import { Rng } from "../src/util/rng.js";
import { runCli } from "../src/cli/main.js";
import { hermesFormat } from "../src/agent/formats/hermes.js";
import { captureIO, startServeChild, tempDir } from "./helpers.js";

let modelDir: string;
let engine: LocalEngine;
let server: RunningServer;
let client: OpenAI;
const user = [{ role: "user" as const, content: "What is 2+3?" }];
/** The server takes JSON bodies only when they say so (fetch would send text/plain). */
const json = { "Content-Type": "application/json" };
const calculator = {
  type: "function" as const,
  function: {
    name: "calculator",
    description: "Evaluate arithmetic",
    parameters: { type: "object", properties: { expression: { type: "string" } }, required: ["expression"] },
  },
};

before(async () => {
  modelDir = join(tempDir("agent-r1-serve-"), "tiny");
  await initModel({ preset: "tiny", out: modelDir });
  engine = await LocalEngine.load(modelDir, { workers: 0 });
  server = await startServer({ engine, port: 0 });
  client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "unused", maxRetries: 0 });
});

after(async () => {
  await server?.close();
  await engine?.dispose();
});

async function post(
  path: string,
  body: string,
  headers: Record<string, string> = { "Content-Type": "application/json" },
) {
  const res = await fetch(`${server.url}${path}`, { method: "POST", body, headers });
  return {
    status: res.status,
    body: (await res.json()) as { error: { message: string; type: string; param: string | null; code: string | null } },
  };
}

function assertErrorObject(body: { error: Record<string, unknown> }, status: number) {
  assert.equal(typeof body.error.message, "string");
  assert.ok((body.error.message as string).length > 0);
  assert.equal(body.error.type, status >= 500 ? "server_error" : "invalid_request_error");
  assert.ok("param" in body.error && "code" in body.error);
}

test("models and health", async () => {
  assert.equal(server.modelId, "tiny");
  const models = await client.models.list();
  assert.deepEqual(
    models.data.map((m) => m.id),
    ["tiny"],
  );
  assert.equal((await client.models.retrieve("tiny")).id, "tiny");
  const health = await fetch(`${server.url}/health`);
  assert.equal(health.status, 200);
  assert.equal(((await health.json()) as { status: string }).status, "ok");
});

test("chat completion without tools: shape, usage, greedy determinism", async () => {
  const req = { model: "tiny", messages: user, max_tokens: 6, temperature: 0 };
  const a = await client.chat.completions.create(req);
  assert.equal(a.object, "chat.completion");
  assert.match(a.id, /^chatcmpl-/);
  assert.equal(a.model, "tiny");
  assert.equal(a.choices.length, 1);
  const c = a.choices[0];
  assert.equal(c.message.role, "assistant");
  assert.equal(typeof c.message.content, "string");
  assert.equal(c.message.tool_calls, undefined);
  assert.ok(c.finish_reason === "stop" || c.finish_reason === "length");
  assert.ok(a.usage!.prompt_tokens > 5);
  assert.ok(a.usage!.completion_tokens >= 1 && a.usage!.completion_tokens <= 6);
  assert.equal(a.usage!.total_tokens, a.usage!.prompt_tokens + a.usage!.completion_tokens);
  const b = await client.chat.completions.create(req);
  assert.equal(b.choices[0].message.content, c.message.content);
  // model omitted is fine (the server serves one model); the OpenAI types require it, so go raw.
  const raw = await fetch(`${server.url}/v1/chat/completions`, {
    method: "POST",
    headers: json,
    body: JSON.stringify({ messages: user, max_tokens: 2 }),
  });
  assert.equal(raw.status, 200);
});

test("chat completion with tools: tools go into the prompt, tool_choice none leaves them out", async () => {
  const plain = await client.chat.completions.create({ model: "tiny", messages: user, max_tokens: 2, temperature: 0 });
  const withTools = await client.chat.completions.create({
    model: "tiny",
    messages: user,
    tools: [calculator],
    max_tokens: 2,
    temperature: 0,
  });
  const none = await client.chat.completions.create({
    model: "tiny",
    messages: user,
    tools: [calculator],
    tool_choice: "none",
    max_tokens: 2,
    temperature: 0,
  });
  assert.ok(withTools.usage!.prompt_tokens > plain.usage!.prompt_tokens + 20);
  assert.equal(none.usage!.prompt_tokens, plain.usage!.prompt_tokens);
  // A random model writes no tool call: plain content, no tool_calls.
  assert.notEqual(withTools.choices[0].finish_reason, "tool_calls");
  assert.equal(withTools.choices[0].message.tool_calls, undefined);
  // A conversation that already holds a call and its result renders too.
  const followUp = await client.chat.completions.create({
    model: "tiny",
    tools: [calculator],
    max_tokens: 2,
    messages: [
      ...user,
      {
        role: "assistant",
        content: null,
        tool_calls: [
          { id: "call_1", type: "function", function: { name: "calculator", arguments: '{"expression":"2+3"}' } },
        ],
      },
      { role: "tool", tool_call_id: "call_1", content: "5" },
    ],
  });
  assert.ok(followUp.usage!.prompt_tokens > withTools.usage!.prompt_tokens);
});

test("tool-call extraction from a fixed text (Hermes format)", () => {
  let k = 0;
  const id = () => `call_${k++}`;
  const text =
    'Let me compute.\n<tool_call>\n{"name": "calculator", "arguments": {"expression": "2+3"}}\n</tool_call>\n<tool_call>\n{"name": "search", "arguments": {"query": "x"}}\n</tool_call>';
  const got = extractToolCalls(text, id)!;
  assert.equal(got.content, "Let me compute.");
  assert.deepEqual(got.toolCalls, [
    { id: "call_0", type: "function", function: { name: "calculator", arguments: '{"expression":"2+3"}' } },
    { id: "call_1", type: "function", function: { name: "search", arguments: '{"query":"x"}' } },
  ]);
  assert.equal(extractToolCalls('<tool_call>{"name": "f", "arguments": {}}</tool_call>', id)!.content, null);
  assert.equal(extractToolCalls("no calls here"), undefined);
  // One unreadable call: the text stays content, as written.
  assert.equal(
    extractToolCalls('<tool_call>{"name": "f", "arguments": {}}</tool_call><tool_call>{oops</tool_call>'),
    undefined,
  );
  assert.equal(extractToolCalls('<tool_call>{"name": "f"'), undefined);
});

/** The real engine's tokenizer and config, with `sample` answering a fixed text then the end-of-turn token. */
function scriptedEngine(text: string): ServedEngine {
  const e = engine;
  const end = e.tokenizer.tokenToId("<|im_end|>")!;
  const tokens = [...e.tokenizer.encode(text), end];
  return {
    tokenizer: e.tokenizer,
    config: e.config,
    computeLogprobs: (s, o) => e.computeLogprobs(s, o),
    sample: async (_prompt, params = {}) => ({
      sequences: Array.from({ length: params.n ?? 1 }, () => ({
        tokens,
        logprobs: tokens.map(() => -0.5),
        stopReason: "stop" as const,
      })),
    }),
  };
}

test("a tool call in the model's text comes back as message.tool_calls, streamed as tool_calls deltas", async () => {
  const said = `Sure.\n${hermesFormat.write({ name: "calculator", arguments: { expression: "2+3" } })}`;
  const scripted = await startServer({ engine: scriptedEngine(said), name: "scripted", port: 0 });
  try {
    const c = new OpenAI({ baseURL: `${scripted.url}/v1`, apiKey: "unused", maxRetries: 0 });
    const res = await c.chat.completions.create({ model: "scripted", messages: user, tools: [calculator] });
    const choice = res.choices[0];
    assert.equal(choice.finish_reason, "tool_calls");
    assert.equal(choice.message.content, "Sure.");
    assert.equal(choice.message.tool_calls!.length, 1);
    const call = choice.message.tool_calls![0];
    assert.equal(call.type, "function");
    assert.match(call.id, /^call_/);
    assert.ok(call.type === "function" && call.function.name === "calculator");
    assert.ok(call.type === "function" && JSON.parse(call.function.arguments).expression === "2+3");

    // With tool_choice none the same text is plain content.
    const none = await c.chat.completions.create({
      model: "scripted",
      messages: user,
      tools: [calculator],
      tool_choice: "none",
    });
    assert.equal(none.choices[0].finish_reason, "stop");
    assert.equal(none.choices[0].message.content, said);

    const stream = await c.chat.completions.create({
      model: "scripted",
      messages: user,
      tools: [calculator],
      stream: true,
    });
    let content = "";
    const calls: { id?: string; name?: string; args: string }[] = [];
    let finish: string | null = null;
    for await (const chunk of stream) {
      const d = chunk.choices[0];
      content += d.delta.content ?? "";
      for (const t of d.delta.tool_calls ?? []) {
        calls[t.index] ??= { args: "" };
        if (t.id) calls[t.index].id = t.id;
        if (t.function?.name) calls[t.index].name = t.function.name;
        calls[t.index].args += t.function?.arguments ?? "";
      }
      finish = d.finish_reason ?? finish;
    }
    assert.equal(content, "Sure.");
    assert.equal(finish, "tool_calls");
    assert.equal(calls.length, 1);
    assert.equal(calls[0].name, "calculator");
    assert.deepEqual(JSON.parse(calls[0].args), { expression: "2+3" });
  } finally {
    await scripted.close();
  }
});

test("streamed chat chunks concatenate to the non-streamed greedy answer", async () => {
  const req = { model: "tiny", messages: user, max_tokens: 8, temperature: 0, seed: 11 };
  const whole = await client.chat.completions.create(req);
  const stream = await client.chat.completions.create({
    ...req,
    stream: true,
    stream_options: { include_usage: true },
  });
  let text = "";
  let role: string | undefined;
  let finish: string | null = null;
  let usage: OpenAI.CompletionUsage | null | undefined;
  for await (const chunk of stream) {
    assert.equal(chunk.object, "chat.completion.chunk");
    if (chunk.usage) usage = chunk.usage;
    const c = chunk.choices[0];
    if (!c) continue;
    role ??= c.delta.role;
    text += c.delta.content ?? "";
    finish = c.finish_reason ?? finish;
  }
  assert.equal(role, "assistant");
  assert.equal(text, whole.choices[0].message.content);
  assert.equal(finish, whole.choices[0].finish_reason);
  assert.deepEqual(usage, whole.usage);

  // The wire format: data lines, ending with [DONE].
  const raw = await fetch(`${server.url}/v1/chat/completions`, {
    method: "POST",
    headers: json,
    body: JSON.stringify({ ...req, stream: true }),
  });
  assert.match(raw.headers.get("content-type")!, /^text\/event-stream/);
  const events = (await raw.text()).split("\n\n").filter((e) => e.length > 0);
  assert.ok(events.every((e) => e.startsWith("data: ")));
  assert.equal(events.at(-1), "data: [DONE]");
});

/** A logical clock for ordering events of this process: each tick is later than the last (order, not time). */
let ticks = 0;
const tick = () => ++ticks;

/** Reads an SSE response as it arrives: each event's payload with the tick its read completed, and when the stream ended. */
async function readEvents(res: Response): Promise<{ events: { at: number; data: string }[]; endedAt: number }> {
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  const events: { at: number; data: string }[] = [];
  let buf = "";
  for (;;) {
    const { done, value } = await reader.read();
    const at = tick();
    if (done) return { events, endedAt: at };
    buf += decoder.decode(value, { stream: true });
    let cut: number;
    while ((cut = buf.indexOf("\n\n")) >= 0) {
      events.push({ at, data: buf.slice(0, cut).replace(/^data: /, "") });
      buf = buf.slice(cut + 2);
    }
  }
}

test("streaming sends chunks while the answer is still being sampled", async () => {
  let resolvedAt = Infinity;
  const timed: ServedEngine = {
    tokenizer: engine.tokenizer,
    config: engine.config,
    computeLogprobs: (s, o) => engine.computeLogprobs(s, o),
    sample: async (prompt, params) => {
      const r = await engine.sample(prompt, params);
      resolvedAt = tick();
      return r;
    },
  };
  const timedServer = await startServer({ engine: timed, name: "tiny", port: 0 });
  try {
    const req = { model: "tiny", messages: user, max_tokens: 24, temperature: 1, seed: 4 };
    const whole = await client.chat.completions.create(req);
    resolvedAt = Infinity;
    const raw = await fetch(`${timedServer.url}/v1/chat/completions`, {
      method: "POST",
      headers: json,
      body: JSON.stringify({ ...req, stream: true }),
    });
    const { events, endedAt } = await readEvents(raw);
    assert.equal(events.at(-1)!.data, "[DONE]");
    const chunks = events
      .slice(0, -1)
      .map((e) => ({ at: e.at, chunk: JSON.parse(e.data) as OpenAI.ChatCompletionChunk }));
    const content = chunks.filter((c) => (c.chunk.choices[0]?.delta.content ?? "") !== "");
    assert.ok(content.length >= 2, `${content.length} content chunks`);
    // The first text arrived before sampling was over, and well before the stream ended.
    assert.ok(content[0].at < resolvedAt, `first chunk at ${content[0].at}, sampling done at ${resolvedAt}`);
    assert.ok(content[0].at < endedAt);
    assert.equal(content.map((c) => c.chunk.choices[0].delta.content).join(""), whole.choices[0].message.content);
    assert.equal(chunks.at(-1)!.chunk.choices[0].finish_reason, whole.choices[0].finish_reason);

    // Completions too: ids one per chunk, the first before sampling ends.
    const creq = { model: "tiny", prompt: "Once upon a time", max_tokens: 24, temperature: 1, seed: 9 };
    const cwhole = (await client.completions.create(creq)) as OpenAI.Completion & {
      choices: { token_ids: number[] }[];
    };
    resolvedAt = Infinity;
    const craw = await fetch(`${timedServer.url}/v1/completions`, {
      method: "POST",
      headers: json,
      body: JSON.stringify({ ...creq, stream: true }),
    });
    const c = await readEvents(craw);
    const cchunks = c.events
      .slice(0, -1)
      .map((e) => ({ at: e.at, chunk: JSON.parse(e.data) as { choices: { text: string; token_ids: number[] }[] } }));
    assert.ok(cchunks[0].at < resolvedAt);
    assert.deepEqual(
      cchunks.flatMap((x) => x.chunk.choices[0].token_ids),
      cwhole.choices[0].token_ids,
    );
    assert.equal(cchunks.map((x) => x.chunk.choices[0].text).join(""), cwhole.choices[0].text);
  } finally {
    await timedServer.close();
  }
});

/** Like scriptedEngine, but reporting every token through onToken as it is "sampled". */
function streamingScriptedEngine(text: string): ServedEngine {
  const e = engine;
  const end = e.tokenizer.tokenToId("<|im_end|>")!;
  const all = [...e.tokenizer.encode(text), end];
  return {
    tokenizer: e.tokenizer,
    config: e.config,
    computeLogprobs: (s, o) => e.computeLogprobs(s, o),
    sample: async (_prompt, params = {}) => {
      const n = params.n ?? 1;
      // Like the scheduler: a stop string ends the sequence with the token that completes it.
      const strings = (params.stop ?? []).filter((x): x is string => typeof x === "string");
      let cut = all.length;
      for (let k = 1; k <= all.length && strings.length > 0; k++) {
        if (strings.some((x) => e.tokenizer.decode(all.slice(0, k)).includes(x))) {
          cut = k;
          break;
        }
      }
      const tokens = all.slice(0, cut);
      for (const t of tokens) {
        for (let i = 0; i < n; i++) params.onToken?.({ index: i, token: t, logprob: -0.5 });
        await new Promise((r) => setImmediate(r));
      }
      return {
        sequences: Array.from({ length: n }, () => ({
          tokens,
          logprobs: tokens.map(() => -0.5),
          stopReason: "stop" as const,
        })),
      };
    },
  };
}

test("live streaming keeps characters whole, holds back stop strings and sends tool calls at the end", async () => {
  const cases: { said: string; extra: Record<string, unknown> }[] = [
    { said: "Ünïcödé 🙂 ok, then STOP and more", extra: { stop: ["zzz", ", th"] } },
    { said: "A stop string split: ST", extra: { stop: "STOP" } },
    {
      said: `Sure.\n${hermesFormat.write({ name: "calculator", arguments: { expression: "2+3" } })}`,
      extra: { tools: [calculator] },
    },
    {
      said: `  leading space then ${hermesFormat.write({ name: "calculator", arguments: { expression: "1" } })} after`,
      extra: { tools: [calculator] },
    },
    { said: "no calls here <tool_ and 🙂🙂", extra: { tools: [calculator], n: 2 } },
  ];
  for (const { said, extra } of cases) {
    const scripted = await startServer({ engine: streamingScriptedEngine(said), name: "scripted", port: 0 });
    try {
      const body = { model: "scripted", messages: user, ...extra };
      const whole = (await (
        await fetch(`${scripted.url}/v1/chat/completions`, {
          method: "POST",
          headers: json,
          body: JSON.stringify(body),
        })
      ).json()) as OpenAI.ChatCompletion;
      assert.ok(Array.isArray(whole.choices), JSON.stringify(whole));
      const raw = await fetch(`${scripted.url}/v1/chat/completions`, {
        method: "POST",
        headers: json,
        body: JSON.stringify({ ...body, stream: true }),
      });
      const { events } = await readEvents(raw);
      const chunks = events.slice(0, -1).map((e) => JSON.parse(e.data) as OpenAI.ChatCompletionChunk);
      for (const w of whole.choices) {
        const mine = chunks.map((c) => c.choices[0]).filter((c) => c.index === w.index);
        const pieces = mine.map((c) => c.delta.content ?? "");
        assert.ok(
          pieces.every((p) => !p.includes("\uFFFD")),
          `${said}: ${JSON.stringify(pieces)}`,
        );
        assert.equal(pieces.join(""), w.message.content ?? "", said);
        if (!said.startsWith(" "))
          assert.ok(pieces.filter((p) => p !== "").length >= 2, `${said}: sent while sampling`);
        const calls = mine.flatMap((c) => c.delta.tool_calls ?? []);
        assert.deepEqual(
          calls.map((t) => t.function!.arguments),
          (w.message.tool_calls ?? []).map((t) => (t as { function: { arguments: string } }).function.arguments),
          said,
        );
        assert.equal(mine.at(-1)!.finish_reason, w.finish_reason);
      }
    } finally {
      await scripted.close();
    }
  }
});

test("n=2 gives two seeded choices", async () => {
  const req = { model: "tiny", messages: user, max_tokens: 5, temperature: 1, seed: 5, n: 2 };
  const a = await client.chat.completions.create(req);
  assert.deepEqual(
    a.choices.map((c) => c.index),
    [0, 1],
  );
  const b = await client.chat.completions.create(req);
  assert.deepEqual(
    b.choices.map((c) => c.message.content),
    a.choices.map((c) => c.message.content),
  );
});

test("chat logprobs with top_logprobs", async () => {
  const res = await client.chat.completions.create({
    model: "tiny",
    messages: user,
    max_tokens: 5,
    temperature: 1,
    seed: 2,
    logprobs: true,
    top_logprobs: 3,
  });
  const entries = res.choices[0].logprobs!.content!;
  assert.ok(entries.length >= 1);
  for (const e of entries) {
    assert.ok(e.logprob < 0 && Number.isFinite(e.logprob));
    assert.equal(e.top_logprobs.length, 3);
    const lps = e.top_logprobs.map((t) => t.logprob);
    assert.deepEqual(
      lps,
      [...lps].sort((x, y) => y - x),
    );
    assert.ok(e.logprob <= lps[0] + 1e-12);
    const same = e.top_logprobs.find((t) => t.token === e.token);
    if (same) assert.ok(Math.abs(same.logprob - e.logprob) < 1e-9);
    if (!e.token.includes("\uFFFD")) assert.equal(Buffer.from(e.bytes!).toString("utf8"), e.token);
  }
  const plain = await client.chat.completions.create({ model: "tiny", messages: user, max_tokens: 2 });
  assert.equal(plain.choices[0].logprobs, null);
});

test("completions with a token-id prompt: token ids out, logprobs equal computeLogprobs", async () => {
  const prompt = engine.tokenizer.encode("The capital of France is");
  const res = await client.completions.create({
    model: "tiny",
    prompt,
    max_tokens: 6,
    temperature: 1,
    seed: 3,
    logprobs: 2,
  });
  assert.equal(res.object, "text_completion");
  const c = res.choices[0] as (typeof res.choices)[0] & { token_ids: number[]; prompt_token_ids: number[] };
  assert.deepEqual(c.prompt_token_ids, prompt);
  assert.ok(c.token_ids.length >= 1 && c.token_ids.length <= 6);
  assert.equal(res.usage!.completion_tokens, c.token_ids.length);
  const lp = c.logprobs!;
  assert.equal(lp.tokens!.length, c.token_ids.length);
  assert.equal(lp.top_logprobs!.length, c.token_ids.length);
  assert.ok(lp.top_logprobs!.every((t) => Object.keys(t).length >= 1 && Object.keys(t).length <= 2));
  const [expected] = await engine.computeLogprobs([[...prompt, ...c.token_ids]]);
  c.token_ids.forEach((_, i) =>
    assert.ok(Math.abs(lp.token_logprobs![i] - expected[prompt.length + i]!) < 1e-4, `token ${i}`),
  );

  // Scoring: echo with max_tokens 0 returns the prompt's own logprobs.
  const scored = await client.completions.create({ model: "tiny", prompt, max_tokens: 0, echo: true, logprobs: 0 });
  const [own] = await engine.computeLogprobs([prompt]);
  const s = scored.choices[0];
  assert.equal(s.text, "The capital of France is");
  assert.equal(s.logprobs!.token_logprobs![0], null);
  own.slice(1).forEach((x, i) => assert.ok(Math.abs(s.logprobs!.token_logprobs![i + 1] - x!) < 1e-4));

  // Streaming gives the same ids, one per chunk.
  const stream = await client.completions.create({
    model: "tiny",
    prompt,
    max_tokens: 6,
    temperature: 1,
    seed: 3,
    stream: true,
  });
  const ids: number[] = [];
  let text = "";
  for await (const chunk of stream) {
    ids.push(...((chunk.choices[0] as unknown as { token_ids: number[] }).token_ids ?? []));
    text += chunk.choices[0].text;
  }
  assert.deepEqual(ids, c.token_ids);
  assert.equal(text, c.text);
});

test("completions with a text prompt, a batch and a stop string", async () => {
  const res = await client.completions.create({
    model: "tiny",
    prompt: ["Hello", "World"],
    max_tokens: 3,
    n: 2,
    temperature: 0,
  });
  assert.deepEqual(
    res.choices.map((c) => c.index),
    [0, 1, 2, 3],
  );
  assert.equal(res.choices[0].text, res.choices[1].text);
  const tok = engine.tokenizer;
  // The text ends before the stop string; the ids stay as sampled.
  const tokens = tok.encode("abc STOP def");
  const out = decodeSequence(
    tok,
    { tokens, logprobs: tokens.map(() => -1), stopReason: "stop" },
    { ids: new Set(), strings: ["STOP"] },
  );
  assert.equal(out.text, "abc ");
  assert.equal(out.pieces.join(""), "abc ");
  assert.equal(out.pieces.length, tokens.length);
  const end = tok.tokenToId("<|im_end|>")!;
  const ended = decodeSequence(
    tok,
    { tokens: [...tok.encode("hi"), end], logprobs: [-1, -1], stopReason: "stop" },
    { ids: new Set([end]), strings: [] },
  );
  assert.equal(ended.text, "hi");
});

test("top alternatives match the distribution draws are made from", () => {
  const logits = Float32Array.from({ length: 50 }, (_, i) => Math.sin(i * 1.7) * 3);
  for (const p of [
    { temperature: 1, topK: 0, topP: 1 },
    { temperature: 0.7, topK: 10, topP: 0.8 },
    { temperature: 0, topK: 0, topP: 1 },
  ]) {
    const alts = topAlternatives(logits, p, 5);
    const lp = logSoftmax(logits, p.temperature || 1);
    const kept = p.temperature > 0 ? keptTokens(lp, p.topK, p.topP) : keptTokens(lp, 0, 1);
    assert.deepEqual(
      alts.map((a) => a.token),
      kept.slice(0, 5),
    );
    for (let s = 0; s < 20; s++) {
      const d = drawToken(logits, p, new Rng(s));
      const hit = alts.find((a) => a.token === d.token);
      if (hit) assert.ok(Math.abs(hit.logprob - d.logprob) < 1e-12);
    }
  }
});

test("concurrent requests are all answered, sharing decode steps", async () => {
  const before = await engine.stats();
  const prompts = Array.from({ length: 8 }, (_, i) => `Question ${i}: what is ${i}+${i}?`);
  const answers = await Promise.all(
    prompts.map((p, i) =>
      i % 2 === 0
        ? client.chat.completions.create({
            model: "tiny",
            messages: [{ role: "user", content: p }],
            max_tokens: 12,
            stop: null,
            seed: i,
          })
        : client.completions.create({ model: "tiny", prompt: p, max_tokens: 12, seed: i }),
    ),
  );
  assert.equal(answers.length, 8);
  for (const a of answers) assert.equal(a.choices.length, 1);
  const stats = await engine.stats();
  const steps = stats.scheduler.decodeSteps - before.scheduler.decodeSteps;
  const rows = stats.scheduler.decodedRows - before.scheduler.decodedRows;
  assert.ok(rows > steps, `no decode step held more than one request (${rows} rows in ${steps} steps)`);
});

test("bad requests get the OpenAI error object with a 4xx status, and the server keeps serving", async () => {
  const malformed = await post("/v1/chat/completions", "{not json");
  assert.equal(malformed.status, 400);
  assertErrorObject(malformed.body, 400);

  const wrongType = await post("/v1/chat/completions", JSON.stringify({ messages: "hi" }));
  assert.equal(wrongType.status, 400);
  assertErrorObject(wrongType.body, 400);
  assert.equal(wrongType.body.error.param, "messages");

  const badField = await post("/v1/chat/completions", JSON.stringify({ messages: user, temperature: "hot" }));
  assert.equal(badField.status, 400);
  assert.equal(badField.body.error.param, "temperature");

  const unknownModel = await post("/v1/chat/completions", JSON.stringify({ model: "gpt-4o", messages: user }));
  assert.equal(unknownModel.status, 404);
  assertErrorObject(unknownModel.body, 404);
  assert.equal(unknownModel.body.error.code, "model_not_found");
  await assert.rejects(
    client.chat.completions.create({ model: "gpt-4o", messages: user }),
    (e: unknown) => e instanceof OpenAI.NotFoundError,
  );

  const huge = await post("/v1/completions", JSON.stringify({ prompt: "x".repeat(2 << 20) }));
  assert.equal(huge.status, 413);
  assertErrorObject(huge.body, 413);

  const route = await post("/v1/embeddings", JSON.stringify({ input: "x" }));
  assert.equal(route.status, 404);
  assertErrorObject(route.body, 404);

  const method = await fetch(`${server.url}/v1/chat/completions`);
  assert.equal(method.status, 405);

  const outOfVocab = await post("/v1/completions", JSON.stringify({ prompt: [1, 10 ** 7], max_tokens: 1 }));
  assert.equal(outOfVocab.status, 400);
  assert.equal(outOfVocab.body.error.param, "prompt");

  const topWithout = await post("/v1/chat/completions", JSON.stringify({ messages: user, top_logprobs: 2 }));
  assert.equal(topWithout.status, 400);
  const penalty = await post("/v1/chat/completions", JSON.stringify({ messages: user, presence_penalty: 1 }));
  assert.equal(penalty.status, 400);
  assert.equal(penalty.body.error.param, "presence_penalty");
  const image = await post(
    "/v1/chat/completions",
    JSON.stringify({ messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: "x" } }] }] }),
  );
  assert.equal(image.status, 400);

  const health = await fetch(`${server.url}/health`);
  assert.equal(health.status, 200);
  const still = await client.chat.completions.create({ model: "tiny", messages: user, max_tokens: 2 });
  assert.equal(still.choices.length, 1);
});

test("serve: a missing model directory is one error line and exit 1", async () => {
  const io = captureIO();
  assert.equal(await runCli(["serve", "--model", join(tempDir(), "missing"), "--port", "0"], io), 1);
  assert.equal(io.stderr.length, 1);
  assert.match(io.stderr[0], /^error: .*missing/);
});

test("serve command: prints where it listens, answers, and exits 0 on SIGTERM", async () => {
  const { line, child, stderr, exited } = await startServeChild(modelDir);
  const m = /^serving tiny on (http:\/\/127\.0\.0\.1:(\d+))$/.exec(line);
  assert.ok(m, line);
  assert.ok(Number(m![2]) > 0);
  assert.equal((await fetch(`${m![1]}/health`)).status, 200);
  child.kill("SIGTERM");
  assert.equal(await exited, 0, stderr());
});
