/**
 * The OpenAI Responses API (POST /responses) on `agent-r1 serve` and on the recording gateway, driven
 * by the real clients: the `openai` client (`responses.create`, streaming and not, function tools,
 * tool loops through function_call_output items and through previous_response_id), the OpenAI
 * Agents SDK's default Responses model and the AI SDK's default OpenAI provider. Exactness: the
 * prompt serve renders for a Responses-API conversation is the chat route's, token for token, and
 * the episode the gateway records for a Responses-API tool loop is the one it records for the same
 * conversation sent through chat completions (steps, logprobs, datums and tool calls). Refusals:
 * what the project cannot do is a 400 naming the field.
 */
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import OpenAI from "openai";
import { z } from "zod";
import { Agent as SdkAgent, OpenAIResponsesModel, run, setTracingDisabled, tool as sdkTool } from "@openai/agents";
import { generateText, stepCountIs, streamText, tool as aiTool } from "ai";
import { createOpenAI } from "@ai-sdk/openai";
import { initModel } from "../src/model/init-model.js";
import { LocalEngine } from "../src/engine/local/local-engine.js";
import { startServer, type RunningServer } from "../src/serve/server.js";
import type { ServedEngine } from "../src/serve/context.js";
import { hermesFormat } from "../src/agent/formats/hermes.js";
import { defineTool, toolSchema } from "../src/agent/tool.js";
import { batchDatums } from "../src/rl/datums.js";
import { agentRollout, type Agent } from "../src/gateway/agent-rollout.js";
import { ScriptedEngine, assistantTurns, chatmlTokenizer } from "../src/testing/index.js";
import type { Trajectory } from "../src/agent/trajectory.js";
import { tempDir } from "./helpers.js";

setTracingDisabled(true);

let engine: LocalEngine;
let server: RunningServer;
let client: OpenAI;
const json = { "Content-Type": "application/json" };
const calculator = {
  type: "function" as const,
  name: "calculator",
  description: "Evaluate arithmetic",
  parameters: { type: "object", properties: { expression: { type: "string" } }, required: ["expression"] },
  strict: false,
};

before(async () => {
  const dir = join(tempDir("agent-r1-responses-"), "tiny");
  await initModel({ preset: "tiny", out: dir });
  engine = await LocalEngine.load(dir, { workers: 0 });
  server = await startServer({ engine, port: 0 });
  client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "unused", maxRetries: 0 });
});

after(async () => {
  await server?.close();
  await engine?.dispose();
});

/**
 * The tiny model's tokenizer and config, with `sample` answering `reply(prompt text)` then the
 * end-of-turn token, reporting each token through onToken; every prompt is kept.
 */
function scriptedServed(reply: (prompt: string) => string): ServedEngine & { prompts: number[][] } {
  const e = engine;
  const end = e.tokenizer.tokenToId("<|im_end|>")!;
  const prompts: number[][] = [];
  return {
    prompts,
    tokenizer: e.tokenizer,
    config: e.config,
    computeLogprobs: (s, o) => e.computeLogprobs(s, o),
    sample: async (prompt, params = {}) => {
      prompts.push(prompt.slice());
      const tokens = [...e.tokenizer.encode(reply(e.tokenizer.decode(prompt))), end];
      for (const t of tokens) {
        params.onToken?.({ index: 0, token: t, logprob: -0.5 });
        await new Promise((r) => setImmediate(r));
      }
      return { sequences: [{ tokens, logprobs: tokens.map(() => -0.5), stopReason: "stop" as const }] };
    },
  };
}

/** A calculator call until a tool result is in the prompt, then the answer. */
const calculatorScript = (prompt: string) =>
  prompt.includes("<tool_response>")
    ? "The answer is 5."
    : `Let me compute.\n${hermesFormat.write({ name: "calculator", arguments: { expression: "2+3" } })}`;

async function withServer<T>(served: ServedEngine, body: (c: OpenAI, url: string) => Promise<T>): Promise<T> {
  const s = await startServer({ engine: served, name: "scripted", port: 0 });
  try {
    return await body(new OpenAI({ baseURL: `${s.url}/v1`, apiKey: "unused", maxRetries: 0 }), s.url);
  } finally {
    await s.close();
  }
}

/** Output items sent back as input items (what the clients do). */
const asInput = (output: OpenAI.Responses.ResponseOutputItem[]) => output as OpenAI.Responses.ResponseInputItem[];

async function postJson(url: string, body: unknown) {
  const res = await fetch(url, { method: "POST", headers: json, body: JSON.stringify(body) });
  return { status: res.status, body: (await res.json()) as { error?: { message: string; param: string | null } } };
}

/** The events of a raw SSE response: `event:` name and parsed `data:`. */
async function sseEvents(res: Response): Promise<{ event: string; data: Record<string, unknown> }[]> {
  const text = await res.text();
  return text
    .split("\n\n")
    .filter((block) => block.trim() !== "")
    .map((block) => {
      const event = /^event: (.*)$/m.exec(block)![1];
      const data = JSON.parse(/^data: (.*)$/m.exec(block)![1]) as Record<string, unknown>;
      return { event, data };
    });
}

test("responses.create on the tiny model: the response object, usage, and the chat route's greedy answer", async () => {
  const input = "What is 2+3?";
  const res = await client.responses.create({ model: "tiny", input, max_output_tokens: 6, temperature: 0 });
  assert.match(res.id, /^resp_/);
  assert.equal(res.object, "response");
  assert.equal(res.model, "tiny");
  assert.equal(typeof res.created_at, "number");
  assert.equal(res.output.length, 1);
  const item = res.output[0];
  assert.ok(item.type === "message" && item.role === "assistant" && /^msg_/.test(item.id));
  assert.equal(item.content[0].type, "output_text");
  const chat = await client.chat.completions.create({
    model: "tiny",
    messages: [{ role: "user", content: input }],
    max_tokens: 6,
    temperature: 0,
  });
  // The same prompt and the same greedy answer as the chat route.
  assert.equal(res.output_text, chat.choices[0].message.content);
  assert.equal(res.usage!.input_tokens, chat.usage!.prompt_tokens);
  assert.equal(res.usage!.output_tokens, chat.usage!.completion_tokens);
  assert.equal(res.usage!.total_tokens, res.usage!.input_tokens + res.usage!.output_tokens);
  assert.equal(res.usage!.input_tokens_details.cached_tokens, 0);
  assert.equal(res.usage!.output_tokens_details.reasoning_tokens, 0);
  if (chat.choices[0].finish_reason === "length") {
    assert.equal(res.status, "incomplete");
    assert.deepEqual(res.incomplete_details, { reason: "max_output_tokens" });
  } else assert.equal(res.status, "completed");
  assert.equal(res.temperature, 0);
  assert.equal(res.max_output_tokens, 6);
  // Streamed: the same answer, ending with response.completed or response.incomplete as the status says.
  const terminal: string[] = [];
  const stream = client.responses.stream({ model: "tiny", input, max_output_tokens: 6, temperature: 0 });
  stream.on("response.completed", () => terminal.push("response.completed"));
  stream.on("response.incomplete", () => terminal.push("response.incomplete"));
  const streamed = await stream.finalResponse();
  assert.equal(streamed.output_text, res.output_text);
  assert.equal(streamed.status, res.status);
  assert.deepEqual(terminal, [`response.${res.status}`]);
  assert.deepEqual(streamed.usage, res.usage);
  // Stored by default: GET /v1/responses/{id} gives it back; DELETE forgets it.
  const again = await client.responses.retrieve(res.id);
  assert.deepEqual(again.output, res.output);
  await client.responses.delete(res.id);
  await assert.rejects(client.responses.retrieve(res.id), /404/);
});

test("a function call comes back as a function_call item, and streamed as the events the openai client assembles", async () => {
  await withServer(scriptedServed(calculatorScript), async (c, url) => {
    const req = { model: "scripted", input: "What is 2+3?", tools: [calculator] };
    const res = await c.responses.create(req);
    assert.equal(res.status, "completed");
    assert.deepEqual(
      res.output.map((o) => o.type),
      ["message", "function_call"],
    );
    assert.equal(res.output_text, "Let me compute.");
    const call = res.output[1];
    assert.ok(call.type === "function_call");
    assert.equal(call.name, "calculator");
    assert.deepEqual(JSON.parse(call.arguments), { expression: "2+3" });
    assert.match(call.call_id, /^call_/);
    assert.match(call.id!, /^fc_/);
    assert.equal(call.status, "completed");
    assert.deepEqual(res.tools[0], { ...calculator, strict: false });

    // The stream helper rebuilds the same response from the events.
    const stream = c.responses.stream(req);
    const deltas: string[] = [];
    stream.on("response.output_text.delta", (e) => deltas.push(e.delta));
    const final = await stream.finalResponse();
    assert.equal(final.status, "completed");
    assert.equal(final.output_text, "Let me compute.");
    assert.ok(deltas.length >= 2, `text sent while sampling: ${JSON.stringify(deltas)}`);
    assert.equal(deltas.join(""), "Let me compute.");
    const streamedCall = final.output[1];
    assert.ok(streamedCall.type === "function_call");
    assert.equal(streamedCall.arguments, call.arguments);

    // The raw events: names, order and sequence numbers.
    const raw = await fetch(`${url}/v1/responses`, {
      method: "POST",
      headers: json,
      body: JSON.stringify({ ...req, stream: true }),
    });
    assert.match(raw.headers.get("content-type")!, /text\/event-stream/);
    const events = await sseEvents(raw);
    events.forEach((e, i) => {
      assert.equal(e.data.type, e.event);
      assert.equal(e.data.sequence_number, i);
    });
    const names = [...new Set(events.map((e) => e.event))];
    assert.deepEqual(names, [
      "response.created",
      "response.in_progress",
      "response.output_item.added",
      "response.content_part.added",
      "response.output_text.delta",
      "response.output_text.done",
      "response.content_part.done",
      "response.output_item.done",
      "response.function_call_arguments.delta",
      "response.function_call_arguments.done",
      "response.completed",
    ]);
    assert.equal((events[0].data.response as { status: string }).status, "in_progress");
  });
});

test("a response past maxResponseBytes is a 413, or a last error event the openai client raises", async () => {
  const long = "word ".repeat(400);
  const s = await startServer({
    engine: scriptedServed(() => long),
    name: "scripted",
    port: 0,
    maxResponseBytes: 4000,
  });
  try {
    const c = new OpenAI({ baseURL: `${s.url}/v1`, apiKey: "unused", maxRetries: 0 });
    await assert.rejects(
      c.responses.create({ model: "scripted", input: "Talk." }),
      (e: unknown) => e instanceof OpenAI.APIError && e.status === 413 && /maxResponseBytes/.test(e.message),
    );
    const seen: string[] = [];
    await assert.rejects(async () => {
      const stream = await c.responses.create({ model: "scripted", input: "Talk.", stream: true });
      for await (const event of stream) seen.push(event.type);
    }, /maxResponseBytes/);
    assert.ok(seen.includes("response.output_text.delta"), "the stream had begun");
    assert.ok(!seen.includes("response.completed"));
  } finally {
    await s.close();
  }
});

test("a tool loop through function_call_output items, and through previous_response_id, renders the chat route's prompts", async () => {
  const viaChat = scriptedServed(calculatorScript);
  await withServer(viaChat, async (c) => {
    const messages: OpenAI.ChatCompletionMessageParam[] = [
      { role: "system", content: "Use the calculator." },
      { role: "user", content: "What is 2+3?" },
    ];
    const tools = [{ type: "function" as const, function: { ...calculator, strict: undefined } }];
    const first = await c.chat.completions.create({ model: "scripted", messages, tools });
    const msg = first.choices[0].message;
    messages.push(msg, { role: "tool", tool_call_id: msg.tool_calls![0].id, content: "5" });
    const second = await c.chat.completions.create({ model: "scripted", messages, tools });
    assert.equal(second.choices[0].message.content, "The answer is 5.");
  });
  assert.equal(viaChat.prompts.length, 2);

  // Input items: the whole conversation again, the output items included.
  const viaItems = scriptedServed(calculatorScript);
  await withServer(viaItems, async (c) => {
    const input: OpenAI.Responses.ResponseInputItem[] = [
      { role: "developer", content: "Use the calculator." },
      { role: "user", content: [{ type: "input_text", text: "What is 2+3?" }] },
    ];
    const first = await c.responses.create({ model: "scripted", input, tools: [calculator] });
    const call = first.output.find((o) => o.type === "function_call")!;
    input.push(...asInput(first.output), { type: "function_call_output", call_id: call.call_id, output: "5" });
    const second = await c.responses.create({ model: "scripted", input, tools: [calculator] });
    assert.equal(second.output_text, "The answer is 5.");
    assert.equal(second.usage!.input_tokens, viaItems.prompts[1].length);
  });
  assert.deepEqual(viaItems.prompts, viaChat.prompts, "input items render as the chat messages");

  // previous_response_id: only the new item, with the instructions sent again.
  const viaPrevious = scriptedServed(calculatorScript);
  await withServer(viaPrevious, async (c) => {
    const instructions = "Use the calculator.";
    const first = await c.responses.create({
      model: "scripted",
      instructions,
      input: "What is 2+3?",
      tools: [calculator],
    });
    const call = first.output.find((o) => o.type === "function_call")!;
    const second = await c.responses.create({
      model: "scripted",
      instructions,
      previous_response_id: first.id,
      input: [{ type: "function_call_output", call_id: call.call_id, output: "5" }],
      tools: [calculator],
    });
    assert.equal(second.previous_response_id, first.id);
    assert.equal(second.output_text, "The answer is 5.");
  });
  assert.deepEqual(viaPrevious.prompts, viaChat.prompts, "previous_response_id continues the conversation");
});

test("previous_response_id needs a stored response: unknown ids and store: false are a 404 naming it", async () => {
  await withServer(
    scriptedServed(() => "Hello."),
    async (c, url) => {
      const unstored = await c.responses.create({ model: "scripted", input: "Hi", store: false });
      assert.equal((unstored as unknown as { store: boolean }).store, false);
      for (const id of [unstored.id, "resp_nope"]) {
        const r = await postJson(`${url}/v1/responses`, { input: "Again", previous_response_id: id });
        assert.equal(r.status, 404);
        assert.equal(r.body.error!.param, "previous_response_id");
        assert.match(r.body.error!.message, new RegExp(id));
      }
      await assert.rejects(c.responses.retrieve(unstored.id), /404/);
      // An item reference names a stored output item, else it is a 404 naming the item.
      const stored = await c.responses.create({ model: "scripted", input: "Hi" });
      const referenced = await c.responses.create({
        model: "scripted",
        input: [
          { role: "user", content: "Hi" },
          { type: "item_reference", id: stored.output[0].id! },
          { role: "user", content: "Again" },
        ],
      });
      assert.equal(referenced.output_text, "Hello.");
      const missing = await postJson(`${url}/v1/responses`, { input: [{ type: "item_reference", id: "msg_nope" }] });
      assert.equal(missing.status, 404);
      assert.equal(missing.body.error!.param, "input.0.id");
    },
  );
});

test("what the project cannot do is a 400 naming the field", async () => {
  const url = `${server.url}/v1/responses`;
  const cases: [Record<string, unknown>, string][] = [
    [{ input: "Hi", tools: [calculator, { type: "web_search" }] }, "tools.1.type"],
    [{ input: "Hi", tools: [{ type: "code_interpreter", container: { type: "auto" } }] }, "tools.0.type"],
    [{ input: "Hi", tools: [{ type: "mcp", server_label: "x", server_url: "http://x" }] }, "tools.0.type"],
    [{ input: "Hi", background: true }, "background"],
    [
      {
        input: [
          {
            role: "user",
            content: [
              { type: "input_text", text: "What is this?" },
              { type: "input_image", image_url: "http://127.0.0.1/x.png" },
            ],
          },
        ],
      },
      "input.0.content.1",
    ],
    [{ input: [{ role: "user", content: [{ type: "input_file", file_id: "file_1" }] }] }, "input.0.content.0"],
    [{ input: [{ type: "computer_call_output", call_id: "c", output: {} }] }, "input.0.type"],
    [{ input: [{ type: "function_call", call_id: "c", name: "f", arguments: "[1]" }] }, "input.0.arguments"],
    [{ input: "Hi", tool_choice: "required" }, "tool_choice"],
    [{ input: "Hi", tools: [calculator], tool_choice: { type: "function", name: "nope" } }, "tool_choice"],
    [{ input: "Hi", tools: [calculator], tool_choice: { type: "allowed_tools", tools: [] } }, "tool_choice"],
    [{ input: "Hi", text: { format: { type: "json_schema", name: "x", schema: {} } } }, "text.format"],
    [{ input: "Hi", reasoning: { effort: "high" } }, "reasoning.effort"],
    [{ input: "Hi", conversation: "conv_1" }, "conversation"],
    [{ input: "Hi", prompt: { id: "pmpt_1" } }, "prompt"],
    [{ input: "Hi", truncation: "auto" }, "truncation"],
    [{ input: [] }, "input"],
    [{ input: "Hi", max_output_tokens: 0 }, "max_output_tokens"],
  ];
  for (const [body, param] of cases) {
    const r = await postJson(url, body);
    assert.equal(r.status, 400, `${param}: ${JSON.stringify(r.body)}`);
    assert.equal(r.body.error!.param, param, r.body.error!.message);
    assert.ok(!r.body.error!.message.includes("\n"), "one line");
  }
  // What is accepted and changes nothing.
  const fine = await client.responses.create({
    model: "tiny",
    input: [
      { type: "reasoning", id: "rs_1", summary: [] },
      { role: "user", content: "Hi" },
    ],
    reasoning: { effort: "none" },
    text: { format: { type: "text" }, verbosity: "low" },
    parallel_tool_calls: false,
    metadata: { run: "test" },
    user: "u",
    store: false,
    max_output_tokens: 2,
  });
  assert.equal(fine.usage!.output_tokens <= 2, true);
  assert.deepEqual(fine.metadata, { run: "test" });
});

// ---- the recording gateway ----

const tok = chatmlTokenizer();
type Row = { system: string; question: string; word: string };
const rows: Row[] = ["alpha", "beta"].map((word) => ({
  system: "Use the tool, then answer in <answer></answer>.",
  question: `Look up ${word}.`,
  word,
}));

const lookup = defineTool({
  name: "lookup",
  description: "Upper-cases a word.",
  inputSchema: z.object({ word: z.string() }),
  execute: async ({ word }) => word.toUpperCase(),
});
const lookupChat = toolSchema(lookup) as OpenAI.ChatCompletionFunctionTool;
const lookupResponses: OpenAI.Responses.FunctionTool = {
  type: "function",
  name: lookupChat.function.name,
  description: lookupChat.function.description,
  parameters: lookupChat.function.parameters!,
  strict: false,
};

/** Two tool turns, then the answer; `say` is written before each call. */
const script = (say = "") =>
  new ScriptedEngine(tok, (c) => {
    const word = /Look up (\w+)\./.exec(c.text)![1];
    return (
      (assistantTurns(c.text) < 2
        ? say + hermesFormat.write({ name: "lookup", arguments: { word } })
        : `<answer>${word.toUpperCase()}</answer>`) + "<|im_end|>"
    );
  });

const answerOf = (text: string | null | undefined) => /<answer>(.*?)<\/answer>/.exec(text ?? "")?.[1];

const chatAgent: Agent<Row> = async (row, ctx) => {
  const c = new OpenAI({ baseURL: ctx.baseURL, apiKey: ctx.apiKey, maxRetries: 0 });
  const messages: OpenAI.ChatCompletionMessageParam[] = [
    { role: "system", content: row.system },
    { role: "user", content: row.question },
  ];
  for (let turn = 0; turn < 5; turn++) {
    const res = await c.chat.completions.create({ model: ctx.model, messages, tools: [lookupChat] });
    const msg = res.choices[0].message;
    messages.push(msg);
    if (!msg.tool_calls?.length) return Number(answerOf(msg.content) === row.word.toUpperCase());
    for (const call of msg.tool_calls) {
      if (call.type !== "function") continue;
      const { word } = JSON.parse(call.function.arguments) as { word: string };
      messages.push({ role: "tool", tool_call_id: call.id, content: word.toUpperCase() });
    }
  }
  return 0;
};

/** The same loop on the Responses API: `mode` says how the history goes back. */
const responsesAgent =
  (mode: "items" | "previous" | "stream"): Agent<Row> =>
  async (row, ctx) => {
    const c = new OpenAI({ baseURL: ctx.baseURL, apiKey: ctx.apiKey, maxRetries: 0 });
    let input: OpenAI.Responses.ResponseInputItem[] = [{ role: "user", content: row.question }];
    let previous: string | undefined;
    for (let turn = 0; turn < 5; turn++) {
      const req = {
        model: ctx.model,
        instructions: row.system,
        input,
        tools: [lookupResponses],
        ...(previous ? { previous_response_id: previous } : {}),
      };
      const res = mode === "stream" ? await c.responses.stream(req).finalResponse() : await c.responses.create(req);
      const output = res.output as OpenAI.Responses.ResponseOutputItem[];
      const calls = output.filter((o): o is OpenAI.Responses.ResponseFunctionToolCall => o.type === "function_call");
      if (calls.length === 0) return Number(answerOf(res.output_text) === row.word.toUpperCase());
      const results = calls.map((call) => ({
        type: "function_call_output" as const,
        call_id: call.call_id,
        output: (JSON.parse(call.arguments) as { word: string }).word.toUpperCase(),
      }));
      if (mode === "previous") {
        previous = res.id;
        input = results;
      } else input = [...input, ...asInput(output), ...results];
    }
    return 0;
  };

const steps = (t: Trajectory) =>
  t.steps.map((s) => ({
    context: s.context,
    extendsPrevious: s.extendsPrevious,
    action: s.action,
    logprobs: s.logprobs,
    observation: s.observation,
    toolCalls: s.toolCalls.map(({ startedAt: _s, durationMs: _d, ...call }) => call),
  }));

test("a Responses-API tool loop through the gateway records the chat-completions episode, token for token", async () => {
  for (const say of ["", "Looking it up.\n"]) await sameEpisodes(say);
});

/** With `say` written before each call (a message item, then function_call items), or not. */
async function sameEpisodes(say: string): Promise<void> {
  const viaChat = await agentRollout(script(say), chatAgent, rows, { n: 2, tokenizer: tok });
  assert.equal(viaChat.failed.length, 0, viaChat.failed.map((t) => t.error?.message).join("; "));
  for (const mode of ["items", "previous", "stream"] as const) {
    const viaResponses = await agentRollout(script(say), responsesAgent(mode), rows, { n: 2, tokenizer: tok });
    assert.equal(viaResponses.failed.length, 0, `${mode}: ${viaResponses.failed.map((t) => t.error?.message)}`);
    const a = viaChat.trajectories,
      b = viaResponses.trajectories;
    assert.equal(b.length, 4);
    b.forEach((t, i) => {
      assert.equal(t.steps.length, 3, mode);
      assert.deepEqual(steps(t), steps(a[i]), `${mode}, trajectory ${i}: steps`);
      assert.equal(t.drift?.firstDiff, -1, `${mode}: no drift`);
      assert.deepEqual(viaResponses.segmentReasons.get(t.id) ?? [], [], `${mode}: one segment`);
      assert.ok(t.steps[0].toolCalls[0].ok && t.steps[0].toolCalls[0].text === rows[t.rowIndex].word.toUpperCase());
    });
    assert.deepEqual(
      b.map((t) => t.reward),
      [1, 1, 1, 1],
    );
    assert.deepEqual(batchDatums(b).datums, batchDatums(a).datums, `${mode}: datums`);
  }
}

test("the gateway refuses a hosted tool with a 400 naming it, and the episode goes on", async () => {
  const agent: Agent<Row> = async (row, ctx) => {
    const c = new OpenAI({ baseURL: ctx.baseURL, apiKey: ctx.apiKey, maxRetries: 0 });
    await assert.rejects(
      c.responses.create({ model: ctx.model, input: row.question, tools: [{ type: "web_search" }] }),
      (e: unknown) => e instanceof OpenAI.BadRequestError && e.param === "tools.0.type",
    );
    await assert.rejects(
      c.responses.create({ model: "gpt-4o", input: row.question }),
      (e: unknown) => e instanceof OpenAI.NotFoundError && /this gateway serves 'policy'/.test(e.message),
    );
    await assert.rejects(
      c.responses.create({ model: ctx.model, input: "x", previous_response_id: "resp_elsewhere" }),
      (e: unknown) => e instanceof OpenAI.NotFoundError && e.param === "previous_response_id",
    );
    return responsesAgent("items")(row, ctx);
  };
  const res = await agentRollout(script(), agent, rows.slice(0, 1), { tokenizer: tok });
  assert.equal(res.failed.length, 0, res.failed.map((t) => t.error?.message).join("; "));
  assert.equal(res.trajectories[0].steps.length, 3);
  assert.equal(res.trajectories[0].reward, 1);
});

/** One recorded episode of a library's agent: three steps in one segment, the calls' results recorded. */
function assertEpisode(t: Trajectory, reasons: string[] | undefined, word: string, label: string): void {
  assert.equal(t.reward, 1, label);
  assert.equal(t.steps.length, 3, label);
  assert.deepEqual(reasons ?? [], [], `${label}: every request extended the episode`);
  assert.equal(t.drift?.firstDiff, -1, label);
  assert.deepEqual(
    t.steps.flatMap((s) => s.toolCalls.map((c) => [c.name, c.ok, c.text])),
    [
      ["lookup", true, word.toUpperCase()],
      ["lookup", true, word.toUpperCase()],
    ],
    label,
  );
}

test("an OpenAI Agents SDK agent on its default Responses model plays an episode through the gateway, streamed or not", async () => {
  const sdkLookup = sdkTool({
    name: "lookup",
    description: "Upper-cases a word.",
    parameters: z.object({ word: z.string() }),
    execute: async ({ word }) => word.toUpperCase(),
  });
  const agent: Agent<Row> = async (row, ctx) => {
    const c = new OpenAI({ baseURL: ctx.baseURL, apiKey: ctx.apiKey, maxRetries: 0 });
    const looker = new SdkAgent({
      name: "looker",
      instructions: row.system,
      tools: [sdkLookup],
      model: new OpenAIResponsesModel(c, ctx.model),
    });
    const options = { maxTurns: 4, signal: ctx.signal };
    let output: unknown;
    if (ctx.sampleIndex === 1) {
      const streamed = await run(looker, row.question, { ...options, stream: true });
      await streamed.completed;
      output = streamed.finalOutput;
    } else output = (await run(looker, row.question, options)).finalOutput;
    return Number(answerOf(output as string) === row.word.toUpperCase());
  };
  const res = await agentRollout(script("Looking it up.\n"), agent, rows.slice(0, 1), { n: 2, tokenizer: tok });
  assert.equal(res.failed.length, 0, res.failed.map((t) => t.error?.message).join("; "));
  assert.equal(res.trajectories.length, 2);
  for (const t of res.trajectories)
    assertEpisode(t, res.segmentReasons.get(t.id), "alpha", t.sampleIndex === 1 ? "streamed" : "not streamed");
  // Streamed or not, the same episode.
  assert.deepEqual(steps(res.trajectories[1]), steps(res.trajectories[0]));
});

test("an AI SDK agent on the default OpenAI provider (Responses API, item references) plays an episode through the gateway", async () => {
  const agent: Agent<Row> = async (row, ctx) => {
    const openai = createOpenAI({ baseURL: ctx.baseURL, apiKey: ctx.apiKey });
    const settings = {
      model: openai(ctx.model),
      system: row.system,
      prompt: row.question,
      tools: {
        lookup: aiTool({
          description: "Upper-cases a word.",
          inputSchema: z.object({ word: z.string() }),
          execute: async ({ word }) => word.toUpperCase(),
        }),
      },
      stopWhen: stepCountIs(4),
      maxRetries: 0,
      abortSignal: ctx.signal,
    };
    const text = ctx.sampleIndex === 1 ? await streamText(settings).text : (await generateText(settings)).text;
    return Number(answerOf(text) === row.word.toUpperCase());
  };
  const res = await agentRollout(script("Looking it up.\n"), agent, rows.slice(1, 2), { n: 2, tokenizer: tok });
  assert.equal(res.failed.length, 0, res.failed.map((t) => t.error?.message).join("; "));
  assert.equal(res.trajectories.length, 2);
  for (const t of res.trajectories)
    assertEpisode(t, res.segmentReasons.get(t.id), "beta", t.sampleIndex === 1 ? "streamText" : "generateText");
  assert.deepEqual(steps(res.trajectories[1]), steps(res.trajectories[0]));
});
