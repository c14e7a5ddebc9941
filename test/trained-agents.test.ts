/**
 * The agents of examples/trained-agents/, written with the real packages (the `openai` client on chat
 * completions and on the Responses API, the Vercel AI SDK on both, the OpenAI Agents SDK on a chat
 * model and on its defaults, LangGraph's ReAct agent), each trained for two iterations on a tiny model with
 * `agent-r1 train` and `task.module`, then evaluated with `agent-r1 eval --task MODULE`: the gateway
 * records their episodes, and the run directory, metrics and checkpoints are those of any task. The
 * MCP example trains in the built-in ToolEnv with the tools of the server its recipe starts.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { runCli } from "../src/cli/main.js";
import { captureIO, tempDir } from "./helpers.js";

const root = tempDir("agent-r1-trained-agents-");
const moduleOf = (name: string) => fileURLToPath(new URL(`../examples/trained-agents/${name}.js`, import.meta.url));

for (const name of [
  "openai-client",
  "openai-responses",
  "ai-sdk",
  "ai-sdk-responses",
  "openai-agents",
  "openai-agents-defaults",
  "langgraph",
]) {
  test(`${name}: two iterations of training through the gateway, then eval of the checkpoint`, async () => {
    const recipe = join(root, `${name}.yaml`);
    writeFileSync(
      recipe,
      `model: { preset: tiny }
task: { module: ${JSON.stringify(moduleOf(name))} }
rollout: { n: 2, maxTurns: 4, maxTokensPerTurn: 48, maxTotalTokens: 1024 }
algorithm: { estimator: grpo }
train: { iterations: 2, batchSize: 2, valEvery: 2, valSize: 2, checkpointEvery: 1 }
`,
    );
    const out = join(root, name);
    const io = captureIO();
    assert.equal(await runCli(["train", "--config", recipe, "--out", out], io), 0, io.stderr.join("\n"));
    const lines = readFileSync(join(out, "metrics.jsonl"), "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    assert.deepEqual(
      lines.map((l) => l.iteration),
      [1, 2],
    );
    for (const l of lines) {
      assert.ok(l.failed < 4, `${name}: every episode of iteration ${l.iteration} failed: ${io.stderr.join("\n")}`);
      assert.ok(l.response_tokens > 0, "the agent's completions were recorded");
    }
    assert.ok(existsSync(join(out, "checkpoints", "step-2", "policy", "model.safetensors")));
    const ev = captureIO();
    const code = await runCli(
      [
        "eval",
        "--model",
        join(out, "checkpoints", "step-2", "policy"),
        "--task",
        moduleOf(name),
        "--split",
        "train",
        "--limit",
        "2",
      ],
      ev,
    );
    assert.equal(code, 0, ev.stderr.join("\n"));
    assert.match(ev.stdout.join("\n"), /episodes/);
  });
}

test("mcp-tools: two iterations in the built-in ToolEnv whose tools come from the MCP server the recipe names", async () => {
  const js = (name: string) => fileURLToPath(new URL(`../examples/trained-agents/${name}.js`, import.meta.url));
  const file = (name: string) => (existsSync(js(name)) ? js(name) : js(name).replace(/\.js$/, ".ts"));
  const server = file("arithmetic-mcp-server");
  // Under tsx (the .ts sources) the server loads tsx too, from the repository (it runs in the recipe's directory).
  const args = [...(server.endsWith(".ts") ? ["--import", import.meta.resolve("tsx")] : []), server, "stdio"];
  const recipe = join(root, "mcp-tools.yaml");
  writeFileSync(
    recipe,
    `model: { preset: tiny }
task:
  module: ${JSON.stringify(file("mcp-tools"))}
  mcp: [{ command: ${JSON.stringify(process.execPath)}, args: ${JSON.stringify(args)}, include: [add, multiply] }]
rollout: { n: 2, maxTurns: 3, maxTokensPerTurn: 24, maxTotalTokens: 1024 }
train: { iterations: 2, batchSize: 2, valEvery: 0, checkpointEvery: 2 }
`,
  );
  const out = join(root, "mcp-tools");
  const io = captureIO();
  assert.equal(await runCli(["train", "--config", recipe, "--out", out], io), 0, io.stderr.join("\n"));
  assert.match(io.stdout.join("\n"), /on 'module:.*mcp-tools\.(js|ts)'/);
  const lines = readFileSync(join(out, "metrics.jsonl"), "utf8")
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l));
  assert.deepEqual(
    lines.map((l) => [l.iteration, l.failed]),
    [
      [1, 0],
      [2, 0],
    ],
  );
  const sample = JSON.parse(readFileSync(join(out, "samples", "iter-1.jsonl"), "utf8").split("\n")[0]);
  assert.match(
    sample.steps[0].context,
    /"name": ?"add"[\s\S]*"name": ?"multiply"/,
    "the server's tools are in the prompt",
  );
  assert.ok(existsSync(join(out, "checkpoints", "step-2", "policy", "model.safetensors")));
});
