/**
 * Every file under examples/ is compiled (tsconfig includes the folder) and run here. The examples
 * import the package by name (`agent-r1`, `agent-r1/agent`), as a user's code does; the conformance
 * suites in agent-conformance.test.ts run them too, this file checks what each one is for.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { join } from "node:path";
import { ToolEnv, chatSetup, hermesFormat, rollout, runToolCall, segments, type Observation } from "agent-r1/agent";
import { ScriptedEngine, assistantTurns, chatmlTokenizer } from "agent-r1/testing";
import { mcpTools } from "agent-r1/tools";
import { calculator, evaluate } from "../examples/agent/calculator-tool.js";
import { lookup } from "../examples/agent/lookup-tool.js";
import { GuessNumberEnv } from "../examples/agent/guess-number-env.js";
import { ShortenToolResponses } from "../examples/agent/shorten-tool-responses.js";
import { repoRoot } from "./repo-root.js";

/** The examples this file runs; a new example fails the first test until it is added here. */
const COVERED = [
  "agent/calculator-tool.ts",
  "agent/guess-number-env.ts",
  "agent/lookup-tool.ts",
  "agent/run-rollout.ts",
  "agent/shorten-tool-responses.ts",
  // Started as a server and asked by reference-judge.test.ts.
  "judges/reference-judge.ts",
  // Trained for two iterations each (and the agents evaluated) by trained-agents.test.ts; checked for shape here.
  "trained-agents/ai-sdk-responses.ts",
  "trained-agents/ai-sdk.ts",
  "trained-agents/arithmetic-mcp-server.ts",
  "trained-agents/arithmetic.ts",
  "trained-agents/langgraph.ts",
  "trained-agents/mcp-tools.ts",
  "trained-agents/openai-agents-defaults.ts",
  "trained-agents/openai-agents.ts",
  "trained-agents/openai-client.ts",
  "trained-agents/openai-responses.ts",
];

function exampleFiles(dir: string, prefix = ""): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? exampleFiles(join(dir, e.name), `${prefix}${e.name}/`) : [`${prefix}${e.name}`],
  );
}

test("every example under examples/ is run by this file and imports the package by name", () => {
  const dir = join(repoRoot(), "examples");
  assert.deepEqual(exampleFiles(dir).sort(), COVERED);
  for (const f of COVERED)
    assert.doesNotMatch(
      readFileSync(join(dir, f), "utf8"),
      /from "(\.\.\/)+src\//,
      `${f} imports agent-r1, not the sources`,
    );
});

test("trained-agents: each module exports the rows and an agent; the reward reads the reply's last number", async () => {
  const arithmetic = await import("../examples/trained-agents/arithmetic.js");
  assert.equal(arithmetic.reward(arithmetic.rows[2], "It is 42."), 1);
  assert.equal(arithmetic.reward(arithmetic.rows[2], "41, no: 43"), 0);
  for (const name of [
    "ai-sdk",
    "ai-sdk-responses",
    "langgraph",
    "openai-agents",
    "openai-agents-defaults",
    "openai-client",
    "openai-responses",
  ]) {
    const m = (await import(`../examples/trained-agents/${name}.js`)) as { rows: unknown[]; agent: unknown };
    assert.equal(m.rows, arithmetic.rows, name);
    assert.equal(typeof m.agent, "function", name);
  }
});

test("trained-agents/mcp-tools: rows, a system prompt and a reward, no agent; its server lists add and multiply", async () => {
  const arithmetic = await import("../examples/trained-agents/arithmetic.js");
  const m = (await import("../examples/trained-agents/mcp-tools.js")) as Record<string, unknown>;
  assert.equal(m.rows, arithmetic.rows);
  assert.equal(m.agent, undefined);
  assert.equal(typeof m.system, "string");
  const reward = m.reward as (row: unknown, answer: string | undefined) => number;
  assert.equal(reward(arithmetic.rows[2], "42"), 1);
  assert.equal(reward(arithmetic.rows[2], undefined), 0);
  const { arithmeticServer } = await import("../examples/trained-agents/arithmetic-mcp-server.js");
  const { InMemoryTransport } = await import("@modelcontextprotocol/sdk/inMemory.js");
  const { Client } = await import("@modelcontextprotocol/sdk/client/index.js");
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await arithmeticServer().connect(serverSide);
  const client = new Client({ name: "test", version: "1.0.0" });
  await client.connect(clientSide);
  try {
    const tools = await mcpTools(client);
    assert.deepEqual(
      tools.map((t) => t.name),
      ["add", "multiply"],
    );
    const call = { ok: true as const, name: "multiply", arguments: { a: 6, b: 7 }, raw: "" };
    const ctx = { row: {}, groundTruth: undefined, callIndex: 0, turn: 0, usage: "" };
    assert.equal((await runToolCall(call, new Map(tools.map((t) => [t.name, t])), ctx)).text, "42");
  } finally {
    await client.close();
  }
});

test("calculator-tool: + - * / and parentheses; a syntax error is the tool's error", async () => {
  assert.equal(evaluate("12 * (3 + 4)"), 12 * (3 + 4));
  assert.equal(evaluate("-1.5/3"), -1.5 / 3);
  assert.equal(evaluate("2 - 3 - 4"), 2 - 3 - 4);
  assert.throws(() => evaluate("1 +"), /expected a number at position 2 of '1 \+'/);
  const call = (expression: string) => ({ ok: true as const, name: "calculator", arguments: { expression }, raw: "" });
  const ctx = { row: {}, groundTruth: undefined, callIndex: 0, turn: 0, usage: "" };
  const tools = new Map([["calculator", calculator]]);
  assert.equal((await runToolCall(call("6*7"), tools, ctx)).text, "42");
  const bad = await runToolCall(call("(1"), tools, ctx);
  assert.equal(bad.ok, false);
  assert.match(bad.text, /expected '\)'/);
});

test("lookup-tool: a passage holding the ground truth earns 0.1; an unknown title lists the titles", async () => {
  const call = (title: string) => ({ ok: true as const, name: "lookup", arguments: { title }, raw: "" });
  const ctx = { row: {}, groundTruth: "Lusk", callIndex: 0, turn: 0, usage: "" };
  const tools = new Map([["lookup", lookup]]);
  const hit = await runToolCall(call("Ada Brenn"), tools, ctx);
  assert.deepEqual([hit.text, hit.reward], ["Ada Brenn (1840-1902) was born in Lusk and founded Kalomi.", 0.1]);
  assert.equal((await runToolCall(call("Kalomi"), tools, ctx)).reward, 0);
  assert.equal(
    (await runToolCall(call("Orra"), tools, ctx)).text,
    "No passage titled 'Orra'. Titles: Kalomi, Ada Brenn, Lusk.",
  );
});

const said = (o: Observation) => ("messages" in o ? o.messages[0]?.content : undefined);

test("guess-number-env: higher, lower, a reply without a guess, then the secret ends the game", async () => {
  const env = new GuessNumberEnv();
  const obs = env.reset({ secret: 7, max: 10 });
  assert.match(JSON.stringify(obs), /from 1 to 10/);
  const act = (text: string) => env.step({ text, tokens: [], logprobs: [], stopReason: "stop", turn: 0 });
  const replies = ["<guess>3</guess>", "<guess>9</guess>", "seven?", "<guess>7</guess>"].map(act);
  assert.deepEqual(
    replies.map((r) => [said(r.observation), r.reward, r.done]),
    [
      ["Higher.", 0, false],
      ["Lower.", 0, false],
      ["Reply with <guess>n</guess>.", -0.1, false],
      [undefined, 1, true],
    ],
  );
  assert.deepEqual(replies[3].info, { valid: true, guesses: 3 });
});

test("shorten-tool-responses: an older tool response is cut, which starts a new segment", async () => {
  const tok = chatmlTokenizer();
  const script = ["Kalomi", "Ada Brenn"];
  const engine = new ScriptedEngine(tok, (c) => {
    const turn = assistantTurns(c.text);
    return (
      (turn < script.length
        ? hermesFormat.write({ name: "lookup", arguments: { title: script[turn] } })
        : "<answer>Lusk</answer>") + "<|im_end|>"
    );
  });
  const rows = [
    {
      prompt: [{ role: "user", content: "Where was the founder of Kalomi born?" }],
      reward_model: { ground_truth: "Lusk" },
    },
  ];
  const makeEnv = () =>
    new ToolEnv({ tools: [lookup], outcomeReward: ({ answer, groundTruth }) => Number(answer === groundTruth) });
  const {
    trajectories: [t],
  } = await rollout(engine, makeEnv, rows, { flow: new ShortenToolResponses(engine, chatSetup(tok), { maxTurns: 5 }) });
  assert.equal(t.reward, 0.1 + 1);
  // Turn 2 sees two tool responses: the older one (52 characters) is cut to 40.
  assert.match(engine.calls[1].text, /founded by Ada Brenn in 1871\./);
  assert.match(engine.calls[2].text, /Kalomi is a river town founded by Ada Br \[shortened\]/);
  assert.doesNotMatch(engine.calls[2].text, /in 1871/);
  assert.deepEqual(segments(t), [[0, 1], [2]]);
});

test("run-rollout: the end-to-end script runs on a random tiny model", async () => {
  const js = fileURLToPath(new URL("../examples/agent/run-rollout.js", import.meta.url));
  const file = existsSync(js) ? js : js.replace(/\.js$/, ".ts");
  const child = spawn(process.execPath, [...process.execArgv, file], { stdio: ["ignore", "pipe", "pipe"] });
  let out = "",
    err = "";
  child.stdout.on("data", (d) => (out += d));
  child.stderr.on("data", (d) => (err += d));
  const code = await new Promise<number | null>((r) => child.on("exit", r));
  assert.equal(code, 0, err);
  const [metrics, ...rest] = out.split("\n");
  assert.equal((JSON.parse(metrics) as { trajectories: number }).trajectories, 2 * 2);
  assert.match(rest.join("\n"), /prefix cache hit rate \d\.\d\d/);
});
