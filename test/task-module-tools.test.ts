/**
 * Module tasks that play in the built-in rollout (src/tasks/module-task.ts): a module exporting
 * `tools` or `makeEnv` trains through the library's `train` on the tiny preset model, a recipe's
 * task.mcp starts a real MCP server over stdio whose tools join the module's and which is gone
 * after the run, and the errors a wrong module or recipe gets are one line naming it. The model is
 * the tiny random one; where the test needs tool calls, the policy's first turn is scripted (its
 * logprobs computed by the model, so the update is a real one) and the rest is sampled.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { z } from "zod";
import { tool as aiTool } from "ai";
import { tool as agentsTool } from "@openai/agents";
import { hermesFormat } from "../src/agent/formats/hermes.js";
import type { AnyTool } from "../src/agent/tool.js";
import { runToolCall } from "../src/agent/tool-runner.js";
import { assistantTurns } from "../src/testing/scripted-engine.js";
import type { EngineFactory, PolicyEngine } from "../src/engine/factory.js";
import { localEngines } from "../src/engine/local/factory.js";
import { loadModuleTask } from "../src/tasks/module-task.js";
import { moduleTools } from "../src/tasks/module-tools.js";
import { train } from "../src/train/run.js";
import { toolBudgetWarning } from "../src/train/tool-budget.js";
import { chatmlTokenizer } from "../src/testing/tokenizers.js";
import { AgentR1Error, InputError } from "../src/util/errors.js";
import { tempDir } from "./helpers.js";

const root = tempDir("agent-r1-module-tools-");

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** A fixture next to this file: compiled .js under dist/, .ts under tsx. */
function fixture(name: string): string {
  const js = fileURLToPath(new URL(`./fixtures/${name}.js`, import.meta.url));
  return existsSync(js) ? js : js.replace(/\.js$/, ".ts");
}

/** The MCP server fixture as a task.mcp command (the .ts one under tsx: the child loads tsx too). */
function mcpServer(pidFile?: string) {
  const script = fixture("mcp-tools-server");
  const tsx = script.endsWith(".ts") ? ["--import", import.meta.resolve("tsx")] : [];
  return { command: process.execPath, args: [...tsx, script, "stdio", ...(pidFile ? [pidFile] : [])] };
}

/** Local engines whose policy plays `script(promptText)` when it returns text (logprobs from the model), else samples. */
function scripted(script: (promptText: string) => string | undefined): EngineFactory {
  const base = localEngines({ workers: 0 });
  const wrap = (engine: PolicyEngine): PolicyEngine => {
    const sample: PolicyEngine["sample"] = async (prompt, params) => {
      const text = script(engine.tokenizer.decode(prompt));
      if (text === undefined) return engine.sample(prompt, params);
      const tokens = [...engine.tokenizer.encode(text), engine.tokenizer.eosTokenId!];
      const [lps] = await engine.computeLogprobs([[...prompt, ...tokens]]);
      return { sequences: [{ tokens, logprobs: lps.slice(prompt.length) as number[], stopReason: "stop" }] };
    };
    return new Proxy(engine, {
      get: (target, prop, receiver) => (prop === "sample" ? sample : Reflect.get(target, prop, receiver)),
    });
  };
  return { ...base, policy: async (dir) => wrap(await base.policy(dir)) };
}

/** First turn: the given tool calls; second: an answer, right every other time (so groups carry signal). */
function callsThenAnswer(calls: { name: string; arguments: Record<string, unknown> }[]) {
  let answers = 0;
  return (prompt: string) => {
    const turn = assistantTurns(prompt);
    if (turn === 0) return hermesFormat.join(calls.map((c) => hermesFormat.write(c)));
    if (turn === 1) return answers++ % 2 === 0 ? "<answer>7</answer>" : "<answer>8</answer>";
    return undefined;
  };
}

const tinyRun = {
  model: { preset: "tiny" },
  rollout: { n: 2, maxTurns: 3, maxTokensPerTurn: 12, maxTotalTokens: 1024 },
  train: { iterations: 2, batchSize: 2, valEvery: 0, checkpointEvery: 2, samplesPerIteration: 4 },
};

interface Sample {
  steps: { toolCalls: { name: string | null; ok: boolean; text: string }[] }[];
}
const samples = (out: string, it: number): Sample[] =>
  readFileSync(join(out, "samples", `iter-${it}.jsonl`), "utf8")
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as Sample);

test("a module exporting tools (ours and a JSON Schema one) trains two iterations through train() in the built-in ToolEnv", async () => {
  const out = join(root, "tools");
  const lines: string[] = [];
  const res = await train(
    { ...tinyRun, task: { module: fixture("tools-module") } },
    {
      out,
      engines: scripted(
        callsThenAnswer([
          { name: "add", arguments: { a: 3, b: 4 } },
          { name: "multiply", arguments: { a: 6, b: 7 } },
        ]),
      ),
      log: (l) => lines.push(l),
    },
  );
  assert.deepEqual(
    res.metrics.map((m) => m.iteration),
    [1, 2],
  );
  for (const m of res.metrics) {
    assert.equal(m.failed, 0, lines.join("\n"));
    assert.equal(m.tool_calls, 2, "every episode made both calls");
    assert.equal(m.tool_errors, 0);
  }
  const calls = samples(out, 1).flatMap((t) => t.steps.flatMap((s) => s.toolCalls));
  assert.deepEqual(
    calls.slice(0, 2).map((c) => [c.name, c.ok, c.text]),
    [
      ["add", true, "7"],
      ["multiply", true, "42"],
    ],
  );
  assert.ok(
    res.metrics.some((m) => m.reward > 0),
    "the module's reward scored the right answers",
  );
  assert.ok(existsSync(join(out, "checkpoints", "step-2", "policy", "model.safetensors")));
});

test("a module exporting makeEnv trains in its own env, with its own rewards", async () => {
  const out = join(root, "env");
  const res = await train(
    { ...tinyRun, task: { module: fixture("env-module") }, train: { ...tinyRun.train, iterations: 1 } },
    { out, engines: scripted(() => "lusk"), log: () => {} },
  );
  assert.equal(res.metrics.length, 1);
  assert.equal(res.metrics[0].failed, 0);
  assert.equal(res.metrics[0].turns, 1, "the env ends every episode after one turn");
  assert.equal(res.metrics[0].reward, 0.5, "the env's reward: 1 for the row whose word is 'lusk', 0 for the other");
});

test("task.mcp: a stdio server's included tools join the module's, are used in rollouts, and the process is gone after the run", async () => {
  const out = join(root, "mcp");
  const pidFile = join(root, "mcp.pid");
  const lines: string[] = [];
  let listed: string[] = [];
  const res = await train(
    {
      ...tinyRun,
      task: { module: fixture("tools-module"), mcp: [{ ...mcpServer(pidFile), include: ["subtract"] }] },
      train: { ...tinyRun.train, iterations: 1 },
    },
    {
      out,
      engines: scripted(callsThenAnswer([{ name: "subtract", arguments: { a: 10, b: 3 } }])),
      log: (l) => lines.push(l),
      onStart: ({ task }) => (listed = (task.tools ?? []).map((t) => t.function.name)),
    },
  );
  assert.deepEqual(listed, ["add", "multiply", "subtract"], "shout and fail were not included");
  assert.equal(res.metrics[0].failed, 0, lines.join("\n"));
  const calls = samples(out, 1).flatMap((t) => t.steps.flatMap((s) => s.toolCalls));
  assert.ok(calls.length > 0);
  for (const c of calls) assert.deepEqual([c.name, c.ok, c.text], ["subtract", true, "7"]);
  const pid = Number(readFileSync(pidFile, "utf8"));
  assert.ok(pid > 0);
  assert.throws(() => process.kill(pid, 0), { code: "ESRCH" }, "the MCP server process is gone");
});

test("task.mcp: a run killed by SIGTERM takes its MCP server process with it, and dies by the signal", async () => {
  const pidFile = join(root, "killed.pid");
  const script = fixture("mcp-hold");
  const tsx = script.endsWith(".ts") ? ["--import", import.meta.resolve("tsx")] : [];
  const child = spawn(process.execPath, [...tsx, script, fixture("mcp-tools-server"), pidFile, ...tsx], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stderr = "";
  child.stderr.on("data", (d) => (stderr += d));
  const exited = new Promise<NodeJS.Signals | null>((r) => child.on("exit", (_code, signal) => r(signal)));
  await new Promise<void>((resolve, reject) => {
    child.stdout.on("data", (d: Buffer) => d.toString().includes("ready") && resolve());
    void exited.then(() => reject(new Error(`the holder exited before it was ready: ${stderr}`)));
  });
  const pid = Number(readFileSync(pidFile, "utf8"));
  process.kill(pid, 0); // the server runs
  child.kill("SIGTERM");
  assert.equal(await exited, "SIGTERM", stderr);
  // The server (which outlives its stdin) gets SIGTERM as the holder dies; it may take a moment to go.
  try {
    for (let i = 0; i < 200 && alive(pid); i++) await new Promise((r) => setTimeout(r, 25));
    assert.equal(alive(pid), false, "the MCP server process is gone");
  } finally {
    if (alive(pid)) process.kill(pid, "SIGKILL");
  }
});

test("task.mcp: include naming a tool the server does not have is one line naming it and what the server has", async () => {
  const pidFile = join(root, "unknown.pid");
  await assert.rejects(
    loadModuleTask({
      module: fixture("tools-module"),
      mcp: [{ ...mcpServer(pidFile), include: ["subtract", "divide"] }],
    }),
    (e: unknown) => {
      assert.ok(e instanceof InputError);
      assert.match(
        e.message,
        /^task\.mcp\[0\] \(.*mcp-tools-server.*\): include names 'divide', which the server does not have; it has: subtract, shout, fail$/,
      );
      assert.doesNotMatch(e.message, /\n/);
      return true;
    },
  );
  const pid = Number(readFileSync(pidFile, "utf8"));
  assert.throws(() => process.kill(pid, 0), { code: "ESRCH" }, "the server opened for the check was closed");
});

test("task.mcp without a module: the servers' tools (less exclude) are the tool set, and the rows come from data.train", async () => {
  const pidFile = join(root, "alone.pid");
  const task = await loadModuleTask({ mcp: [{ ...mcpServer(pidFile), exclude: ["fail"] }] });
  try {
    assert.deepEqual(
      task.tools?.map((t) => t.function.name),
      ["subtract", "shout"],
    );
    assert.throws(() => task.rows("train"), {
      message: "task.mcp without task.module: the training rows come from data.train",
    });
    assert.deepEqual(task.rows("val"), []);
  } finally {
    await task.close?.();
  }
  assert.equal(alive(Number(readFileSync(pidFile, "utf8"))), false, "close() ended the server");
});

test("a module exporting both agent and tools is one line naming the module and what it exports", async () => {
  const path = fixture("agent-and-tools-module");
  await assert.rejects(loadModuleTask({ module: path }), (e: unknown) => {
    assert.ok(e instanceof InputError);
    assert.equal(
      e.message,
      `task.module ${path}: exports agent and tools; export exactly one of agent, tools, makeEnv`,
    );
    return true;
  });
  await assert.doesNotReject(loadModuleTask({ module: fixture("failing-agent-module") }), "agent alone loads");
});

test("all episodes failed before any checkpoint: the row, the agent's first error line, and no --resume in the hint", async () => {
  const out = join(root, "failing");
  await assert.rejects(
    train({ ...tinyRun, task: { module: fixture("failing-agent-module") } }, { out, log: () => {} }),
    (e: unknown) => {
      assert.ok(e instanceof AgentR1Error);
      assert.equal(
        e.message,
        'iteration 1: all 4 episodes failed; first: row 1 of the batch ({"question":"What is 3 plus 4?","answer":7}): agent: the search backend refused the connection',
      );
      assert.doesNotMatch(e.hint ?? "", /--resume/);
      assert.match(e.hint ?? "", /^fix the agent, then start the run again \(no checkpoint was written yet/);
      return true;
    },
  );
});

test("a module's tools may be AI SDK tools in a record or Agents SDK tools in a list; anything else is named", async () => {
  const pair = z.object({ a: z.number(), b: z.number() });
  const fromAi = await moduleTools(
    { add: aiTool({ description: "Adds.", inputSchema: pair, execute: async ({ a, b }) => a + b }) },
    "task.module m.ts",
  );
  const fromAgents = await moduleTools(
    [agentsTool({ name: "sub", description: "Subtracts.", parameters: pair, execute: async ({ a, b }) => a - b })],
    "task.module m.ts",
  );
  const ctx = { row: {}, groundTruth: undefined, callIndex: 0, turn: 0, usage: "" };
  const run = async (t: AnyTool, args: object) =>
    (await runToolCall({ ok: true, name: t.name, arguments: { ...args }, raw: "" }, new Map([[t.name, t]]), ctx)).text;
  assert.equal(await run(fromAi[0], { a: 2, b: 3 }), "5");
  assert.equal(await run(fromAgents[0], { a: 9, b: 4 }), "5");
  await assert.rejects(moduleTools([{ description: "no name" }], "task.module m.ts"), {
    message: "task.module m.ts: tools[0] is not a tool",
  });
  await assert.rejects(moduleTools([], "task.module m.ts"), { message: "task.module m.ts: tools is empty" });
});

test("tool schemas over half the context are one warning line naming the task and the limit", () => {
  const tok = chatmlTokenizer();
  const tools = Array.from({ length: 4 }, (_, i) => ({
    type: "function" as const,
    function: { name: `tool_${i}`, description: "x".repeat(200), parameters: { type: "object", properties: {} } },
  }));
  const limits = { maxTotalTokens: 256, maxPositionEmbeddings: 2048 };
  const warning = toolBudgetWarning({ name: "module:m.ts", tools }, tok, limits);
  assert.match(
    warning ?? "",
    /^warning: task 'module:m\.ts': its 4 tool schemas take \d+ tokens of every prompt, more than half of the 256-token context \(rollout\.maxTotalTokens\)/,
  );
  assert.equal(
    toolBudgetWarning({ name: "m", tools: tools.slice(0, 1) }, tok, { ...limits, maxTotalTokens: 100_000 }),
    undefined,
  );
});
