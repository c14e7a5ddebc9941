/**
 * Tools from the ecosystem, through the real packages: JSON Schema and Standard Schema (valibot)
 * tool definitions; Vercel AI SDK tools (zod and `jsonSchema(...)`), OpenAI Agents SDK function
 * tools, and the tools of an MCP server (the SDK's in-memory transport, and a server process over
 * stdio), each run by our tool runner with its validation, timeouts and error observations; and a
 * ToolEnv rollout whose tools come from MCP.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { z } from "zod";
import * as v from "valibot";
import { tool as aiTool, jsonSchema } from "ai";
import { tool as agentsTool } from "@openai/agents";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { defineTool, toolSchema, type AnyTool } from "../src/agent/tool.js";
import { runToolCall } from "../src/agent/tool-runner.js";
import { ToolEnv } from "../src/agent/tool-env.js";
import { rollout } from "../src/agent/rollout.js";
import { hermesFormat } from "../src/agent/formats/hermes.js";
import { connectMcp, fromAgentsSdkTools, fromAiSdkTools, mcpTools } from "../src/tools/ecosystem.js";
import { ScriptedEngine, assistantTurns, chatmlTokenizer } from "../src/testing/index.js";
import { calculatorServer } from "./fixtures/mcp-server.js";

const ctx = { row: {}, groundTruth: undefined, callIndex: 0, turn: 0, usage: "" };
const call = (name: string, args: Record<string, unknown>) => ({ ok: true as const, name, arguments: args, raw: "" });
const run = (tools: AnyTool[], name: string, args: Record<string, unknown>) =>
  runToolCall(call(name, args), new Map(tools.map((t) => [t.name, t])), ctx);

test("defineTool takes a JSON Schema object: listed as given, arguments checked with it", async () => {
  const t = defineTool({
    name: "add",
    description: "Adds.",
    inputSchema: { type: "object", properties: { a: { type: "number" }, b: { type: "number" } }, required: ["a", "b"] },
    execute: ({ a, b }) => String((a as number) + (b as number)),
  });
  assert.deepEqual(toolSchema(t).function.parameters, {
    type: "object",
    properties: { a: { type: "number" }, b: { type: "number" } },
    required: ["a", "b"],
  });
  assert.equal((await run([t], "add", { a: 2, b: 3 })).text, "5");
  const bad = await run([t], "add", { a: "2" });
  assert.equal(bad.error?.kind, "invalid_arguments");
  assert.match(bad.text, /invalid arguments for tool 'add': /);
  assert.match(bad.text, /a: must be number/);
  assert.match(bad.text, /\(arguments\): must have required property 'b'/);
  assert.throws(
    () => defineTool({ name: "x", description: "x", inputSchema: { type: "array" } as never, execute: () => "" }),
    /must be a zod schema, a Standard Schema validator or a JSON Schema object/,
  );
});

test("defineTool takes any Standard Schema validator (valibot), with its JSON Schema beside it", async () => {
  const schema = v.object({ word: v.pipe(v.string(), v.minLength(2)) });
  const t = defineTool({
    name: "shout",
    description: "Upper-cases a word.",
    inputSchema: schema,
    jsonSchema: { type: "object", properties: { word: { type: "string", minLength: 2 } }, required: ["word"] },
    execute: ({ word }) => word.toUpperCase(),
  });
  assert.equal((await run([t], "shout", { word: "hey" })).text, "HEY");
  const bad = await run([t], "shout", { word: "h" });
  assert.match(bad.text, /invalid arguments for tool 'shout': word: Invalid length/);
  assert.throws(
    () => defineTool({ name: "y", description: "y", inputSchema: schema, execute: () => "" }),
    (e: unknown) => e instanceof Error && /does not say its JSON Schema/.test(e.message),
  );
});

test("Vercel AI SDK tools: zod and jsonSchema() inputs, execute with an abort signal, thrown errors as observations", async () => {
  const tools = await fromAiSdkTools({
    multiply: aiTool({
      description: "Multiplies.",
      inputSchema: z.object({ a: z.number(), b: z.number() }),
      execute: async ({ a, b }, { abortSignal }) => ({ product: a * b, aborted: abortSignal?.aborted ?? null }),
    }),
    echo: aiTool({
      description: "Echoes.",
      inputSchema: jsonSchema<{ text: string }>({
        type: "object",
        properties: { text: { type: "string" } },
        required: ["text"],
      }),
      execute: async ({ text }) => text,
    }),
    broken: aiTool({
      description: "Fails.",
      inputSchema: z.object({}),
      execute: async (): Promise<string> => {
        throw new Error("no such row");
      },
    }),
  });
  assert.deepEqual(
    tools.map((t) => t.name),
    ["multiply", "echo", "broken"],
  );
  assert.equal((await run(tools, "multiply", { a: 6, b: 7 })).text, '{"product":42,"aborted":false}');
  assert.equal((await run(tools, "echo", { text: "hi" })).text, "hi");
  assert.match((await run(tools, "echo", {})).text, /invalid arguments for tool 'echo'/);
  const broken = await run(tools, "broken", {});
  assert.equal(broken.error?.kind, "tool_error");
  assert.match(broken.text, /tool 'broken' failed: no such row/);
});

test("OpenAI Agents SDK function tools run as the SDK invokes them", async () => {
  const [add] = await fromAgentsSdkTools([
    agentsTool({
      name: "add",
      description: "Adds.",
      parameters: z.object({ a: z.number(), b: z.number() }),
      execute: async ({ a, b }) => String(a + b),
    }),
  ]);
  assert.equal(toolSchema(add).function.name, "add");
  assert.equal((await run([add], "add", { a: 20, b: 22 })).text, "42");
  assert.equal((await run([add], "add", { a: 1 })).error?.kind, "invalid_arguments");
  await assert.rejects(fromAgentsSdkTools([{ type: "hosted_tool", name: "web_search" }]), /not a function tool/);
});

test("MCP tools (in-memory transport): listed, called, isError and a closed transport become observations", async () => {
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  const server = calculatorServer();
  await server.connect(serverSide);
  const client = new Client({ name: "test", version: "1.0.0" });
  await client.connect(clientSide);
  const tools = await mcpTools(client, { timeoutMs: 2000 });
  assert.deepEqual(tools.map((t) => t.name).sort(), ["add", "fail"]);
  assert.equal((await run(tools, "add", { a: 2, b: 40 })).text, "42");
  assert.match((await run(tools, "add", { a: "x", b: 1 })).text, /invalid arguments for tool 'add': a: must be number/);
  const failed = await run(tools, "fail", {});
  assert.equal(failed.error?.kind, "tool_error");
  assert.match(failed.text, /tool 'fail' failed: the database is down/);
  await client.close();
  const gone = await run(tools, "add", { a: 1, b: 1 });
  assert.equal(gone.ok, false);
  assert.match(gone.text, /tool 'add' failed: /);
});

test("MCP over stdio: a server process's tools in a ToolEnv rollout", async () => {
  const script = fileURLToPath(new URL("./fixtures/mcp-server.js", import.meta.url));
  const client = await connectMcp({ command: process.execPath, args: [script, "stdio"] });
  try {
    const tools = await mcpTools(client);
    const tok = chatmlTokenizer();
    const engine = new ScriptedEngine(
      tok,
      (c) =>
        (assistantTurns(c.text) === 0
          ? hermesFormat.write({ name: "add", arguments: { a: 19, b: 23 } })
          : "<answer>42</answer>") + "<|im_end|>",
    );
    const rows = [{ prompt: [{ role: "user", content: "What is 19 + 23?" }], reward_model: { ground_truth: "42" } }];
    const res = await rollout(
      engine,
      () => new ToolEnv({ tools, outcomeReward: ({ answer, groundTruth }) => Number(answer === groundTruth) }),
      rows,
      { tokenizer: tok },
    );
    const t = res.trajectories[0];
    assert.equal(t.reward, 1);
    assert.equal(t.steps[0].toolCalls[0].text, "42");
    assert.match(tok.decode(t.steps[0].observation), /42/);
  } finally {
    await client.close();
  }
  await assert.rejects(connectMcp({ command: process.execPath, args: ["-e", "process.exit(3)"] }), /MCP server/);
});
