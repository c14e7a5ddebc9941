/**
 * The recording gateway and `task.module` agents against hostile or careless agents:
 * each episode's key opens only that episode; whatever an agent throws or leaves unhandled fails
 * only its own episode and never the process; tool results the agent sends back are recorded as
 * they were (ok or error); maxTurns and maxTotalTokens end an episode as truncated with an answer
 * the `openai` client does not retry; a non-finite reward is named as it is; a relative
 * `task.module` is found from the recipe's directory, and again from the saved config elsewhere.
 * A scripted model throughout: the model is not the point.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import OpenAI from "openai";
import { stringify as toYaml } from "yaml";
import { z } from "zod";
import { rollout } from "../src/agent/rollout.js";
import { chatSetup } from "../src/agent/chat-setup.js";
import { defineTool, toolSchema } from "../src/agent/tool.js";
import { ToolEnv } from "../src/agent/tool-env.js";
import { hermesFormat } from "../src/agent/formats/hermes.js";
import { agentRollout, type Agent, type AgentContext } from "../src/gateway/agent-rollout.js";
import { Gateway } from "../src/gateway/gateway.js";
import { originalFetch } from "../src/gateway/episode-fetch.js";
import { ScriptedEngine, assistantTurns, chatmlTokenizer } from "../src/testing/index.js";
import { loadConfig } from "../src/train/load-config.js";
import { loadTask } from "../src/tasks/index.js";
import { repoRoot } from "./repo-root.js";
import { tempDir } from "./helpers.js";

const tok = chatmlTokenizer();
type Row = { prompt: { role: string; content: string }[]; reward_model: { ground_truth: string } };
const row = (content: string): Row => ({
  prompt: [{ role: "user", content }],
  reward_model: { ground_truth: "" },
});

const client = (ctx: AgentContext, extra: Partial<ConstructorParameters<typeof OpenAI>[0]> = {}) =>
  new OpenAI({ baseURL: ctx.baseURL, apiKey: ctx.apiKey, maxRetries: 0, ...extra });

/** A model that always calls `lookup`: an agent that keeps answering the calls never stops on its own. */
const alwaysCalls = () =>
  new ScriptedEngine(tok, () => hermesFormat.write({ name: "lookup", arguments: { word: "loop" } }) + "<|im_end|>");

const lookupSchema: OpenAI.ChatCompletionTool = {
  type: "function",
  function: { name: "lookup", parameters: { type: "object", properties: { word: { type: "string" } } } },
};

test("a request to one episode's URL with another episode's key is a 401; each episode's own key opens it", async () => {
  const engine = new ScriptedEngine(tok, () => "hello<|im_end|>");
  const gateway = await new Gateway({
    chat: chatSetup(tok),
    engine,
    maxTokensPerTurn: 16,
    maxTotalTokens: 256,
    temperature: 1,
  }).start();
  try {
    const a = gateway.open({ rowIndex: 0, sampleIndex: 0 });
    const b = gateway.open({ rowIndex: 0, sampleIndex: 1 });
    assert.notEqual(a.apiKey, b.apiKey);
    const post = (url: string, key?: string) =>
      fetch(`${url}/chat/completions`, {
        method: "POST",
        headers: { "Content-Type": "application/json", ...(key ? { Authorization: `Bearer ${key}` } : {}) },
        body: JSON.stringify({ messages: [{ role: "user", content: "hi" }] }),
      });
    for (const [key, what] of [
      [b.apiKey, "B's key"],
      [undefined, "no key"],
      [`${a.apiKey}x`, "A's key with a byte more"],
    ] as const) {
      const res = await post(a.baseURL, key);
      assert.equal(res.status, 401, what);
      const body = (await res.json()) as { error: { code: string; message: string } };
      assert.equal(body.error.code, "invalid_api_key");
      assert.match(body.error.message, new RegExp(`not episode ${a.id}'s`));
    }
    assert.equal(engine.calls.length, 0, "nothing was sampled for a refused request");
    const models = await fetch(`${a.baseURL}/models`, { headers: { Authorization: `Bearer ${b.apiKey}` } });
    assert.equal(models.status, 401, "GET /models needs the episode's own key too");
    assert.equal((await post(a.baseURL, a.apiKey)).status, 200);
    assert.equal((await post(b.baseURL, b.apiKey)).status, 200);
    assert.equal(engine.calls.length, 2);
  } finally {
    await gateway.stop();
  }
  // Through agentRollout: every agent gets a key of its own. Another episode's URL refuses it; from
  // inside an agent, the global fetch sends such a request to the agent's own episode instead
  // (episode-fetch.ts), so it never reaches the other one either way.
  const seen: AgentContext[] = [];
  const others: number[] = [];
  const reroutedStatus: number[] = [];
  const agent: Agent<Row> = async (_row, ctx) => {
    seen.push(ctx);
    await client(ctx).chat.completions.create({ model: ctx.model, messages: [{ role: "user", content: "hi" }] });
    while (seen.length < 2) await new Promise((r) => setTimeout(r, 5));
    const other = seen.find((c) => c !== ctx)!;
    const headers = { Authorization: `Bearer ${ctx.apiKey}` };
    others.push((await originalFetch()(`${other.baseURL}/models`, { headers })).status);
    const rerouted = await fetch(`${other.baseURL}/models`, { headers: { Authorization: `Bearer ${other.apiKey}` } });
    reroutedStatus.push(rerouted.status);
    return 1;
  };
  const res = await agentRollout(new ScriptedEngine(tok, () => "ok<|im_end|>"), agent, [row("hi")], {
    n: 2,
    tokenizer: tok,
  });
  assert.equal(res.trajectories.length, 2);
  assert.notEqual(seen[0].apiKey, seen[1].apiKey);
  assert.deepEqual(others, [401, 401]);
  assert.deepEqual(reroutedStatus, [200, 200]);
});

test("agents that leave a rejection or an exception unhandled, or throw unprintable values, fail alone; the process lives, and Node's own handling is back after the rollout", () => {
  const mod = (p: string) => {
    const js = fileURLToPath(new URL(`../src/${p}.js`, import.meta.url));
    return pathToFileURL(existsSync(js) ? js : js.replace(/\.js$/, ".ts")).href;
  };
  const child = `
import OpenAI from "openai";
import { agentRollout } from ${JSON.stringify(mod("gateway/agent-rollout"))};
import { ScriptedEngine, chatmlTokenizer } from ${JSON.stringify(mod("testing/index"))};
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
// Agent 1's first answer waits until its second request has been answered (409), whatever the
// machine's speed: the second request must arrive while the first is still sampling.
let secondAnswered;
const second = new Promise((r) => (secondAnswered = r));
const engine = new ScriptedEngine(
  chatmlTokenizer(),
  async (call) => {
    if (call.text.includes("one")) await second;
    return "fine<|im_end|>";
  },
  { delayMs: 30 },
);
const baseline = process.listenerCount("unhandledRejection");
let during = -1;
const ask = (ctx, text) =>
  new OpenAI({ baseURL: ctx.baseURL, apiKey: ctx.apiKey, maxRetries: 0 }).chat.completions.create({
    model: ctx.model,
    messages: [{ role: "user", content: text }],
  });
const revoked = () => { const p = Proxy.revocable({}, {}); p.revoke(); return p.proxy; };
const agents = [
  async (_row, ctx) => { during = process.listenerCount("unhandledRejection"); await ask(ctx, "hi"); return 1; },
  async (_row, ctx) => {
    const first = ask(ctx, "one");
    const before = engine.calls.length;
    while (engine.calls.length === before) await sleep(2);
    // a second request while the first runs: its 409 is never caught
    new OpenAI({
      baseURL: ctx.baseURL,
      apiKey: ctx.apiKey,
      maxRetries: 0,
      fetch: async (...a) => {
        try {
          return await fetch(...a);
        } finally {
          secondAnswered();
        }
      },
    }).chat.completions.create({ model: ctx.model, messages: [{ role: "user", content: "two" }] });
    await first;
    await sleep(200);
    return 1;
  },
  async (_row, ctx) => { await ask(ctx, "hi"); Promise.reject(new Error("left behind just before returning")); return 1; },
  async () => { throw null; },
  async () => { throw undefined; },
  () => { throw revoked(); },
  async () => { throw { toString() { throw new Error("no text"); } }; },
  async () => { throw new Proxy({}, { get() { throw 1; }, getPrototypeOf() { throw 1; }, has() { throw 1; } }); },
  async (_row, ctx) => { await ask(ctx, "hi"); return 0.5; },
  async (_row, ctx) => { await ask(ctx, "hi"); setTimeout(() => { throw new Error("thrown in a timer"); }, 0); await sleep(300); return 1; },
];
const lines = [];
const res = await agentRollout(engine, (row, ctx) => agents[ctx.sampleIndex](row, ctx), [{ prompt: [] }], {
  n: agents.length,
  tokenizer: chatmlTokenizer(),
  log: (l) => lines.push(l),
});
console.log(JSON.stringify({
  kept: res.trajectories.map((t) => t.sampleIndex),
  failed: res.failed.map((t) => [t.sampleIndex, t.error.message]),
  metricsFailed: res.metrics.failed,
  unhandled: res.unhandledRejections,
  baseline,
  during,
  lines,
}));
for (let i = 0; i < 200 && process.listenerCount("unhandledRejection") > baseline; i++) await sleep(50);
console.log("GUARD " + process.listenerCount("unhandledRejection") + " " + process.listenerCount("uncaughtException"));
Promise.reject(new Error("a late rejection with no agent rollout running"));
await sleep(2000);
console.log("STILL ALIVE");
`;
  const run = spawnSync(
    process.execPath,
    [...process.execArgv.filter((a) => !a.startsWith("--test")), "--input-type=module", "-e", child],
    { cwd: repoRoot(), encoding: "utf8", timeout: 60_000 },
  );
  const out = run.stdout.split("\n");
  const report = JSON.parse(out[0]) as {
    kept: number[];
    failed: [number, string][];
    metricsFailed: number;
    unhandled: number;
    baseline: number;
    during: number;
    lines: string[];
  };
  assert.deepEqual(report.kept, [0, 8], `the good episodes are kept: ${run.stdout} ${run.stderr}`);
  assert.equal(report.metricsFailed, 8);
  const why = Object.fromEntries(report.failed);
  assert.match(why[1], /^the agent left a promise rejection unhandled: 409 .*one at a time/);
  assert.match(why[2], /^the agent left a promise rejection unhandled: left behind just before returning/);
  assert.equal(why[3], "the agent threw null");
  assert.equal(why[4], "the agent threw undefined");
  assert.equal(why[5], "the agent threw [an unprintable value]");
  assert.equal(why[6], "the agent threw [object Object]");
  assert.equal(why[7], "the agent threw [an unprintable value]");
  assert.match(why[9], /^the agent left an exception uncaught: thrown in a timer/);
  assert.equal(report.unhandled, 3);
  assert.equal(report.lines.length, 8, "one line per failed episode");
  assert.equal(report.during, report.baseline + 1, "the guard is installed while agents run");
  assert.equal(out[1], `GUARD ${report.baseline} 0`, "and removed after the rollout");
  assert.ok(!run.stdout.includes("STILL ALIVE"), "a rejection with no rollout running ends the process, as Node does");
  assert.notEqual(run.status, 0);
  assert.match(run.stderr, /a late rejection with no agent rollout running/);
});

test("tool results the agent sends back are recorded on their calls, ok or error, as the built-in rollout records them", async () => {
  const lookup = defineTool({
    name: "lookup",
    description: "Upper-cases a known word.",
    inputSchema: z.object({ word: z.string() }),
    execute: async ({ word }) => {
      if (word === "missing") throw new Error("no entry for 'missing'");
      return word.toUpperCase();
    },
  });
  const script = () =>
    new ScriptedEngine(
      tok,
      (c) =>
        (assistantTurns(c.text) === 0
          ? `${hermesFormat.write({ name: "lookup", arguments: { word: "alpha" } })}\n${hermesFormat.write({ name: "lookup", arguments: { word: "missing" } })}`
          : "<answer>ALPHA</answer>") + "<|im_end|>",
    );
  const rows = [row("Look up alpha.")];
  const builtIn = await rollout(script(), () => new ToolEnv({ tools: [lookup], outcomeReward: () => 1 }), rows, {
    tokenizer: tok,
  });
  // The user's agent runs the same tool, and writes a failure as ToolEnv does ("Error: ...").
  const agent: Agent<Row> = async (r, ctx) => {
    const c = client(ctx);
    const messages: OpenAI.ChatCompletionMessageParam[] = [{ role: "user", content: r.prompt[0].content }];
    const tools = [toolSchema(lookup) as OpenAI.ChatCompletionTool];
    for (let turn = 0; turn < 3; turn++) {
      const msg = (await c.chat.completions.create({ model: ctx.model, messages, tools })).choices[0].message;
      messages.push(msg);
      if (!msg.tool_calls?.length) return 1;
      for (const call of msg.tool_calls) {
        if (call.type !== "function") continue;
        let content: string;
        try {
          content = (await lookup.execute(JSON.parse(call.function.arguments), {} as never)) as string;
        } catch (e) {
          content = `Error: tool 'lookup' failed: ${(e as Error).message}`;
        }
        messages.push({ role: "tool", tool_call_id: call.id, content });
      }
    }
    return 0;
  };
  const res = await agentRollout(script(), agent, rows, { tokenizer: tok });
  assert.equal(res.failed.length, 0, res.failed.map((t) => t.error?.message).join("; "));
  const calls = res.trajectories[0].steps[0].toolCalls;
  assert.deepEqual(
    calls.map((c) => [c.ok, c.text, c.error?.kind]),
    [
      [true, "ALPHA", undefined],
      [false, "Error: tool 'lookup' failed: no entry for 'missing'", "tool_error"],
    ],
  );
  const ref = builtIn.trajectories[0].steps[0].toolCalls;
  assert.deepEqual(
    calls.map((c) => [c.ok, c.text, c.error?.kind]),
    ref.map((c) => [c.ok, c.text, c.error?.kind]),
    "the same records as ToolEnv's",
  );
  assert.equal(res.metrics.toolCalls, 2);
  assert.equal(res.metrics.toolErrors.tool_error, 1, "tool_errors counts the error, not every call");
  assert.deepEqual(res.metrics.toolErrors, builtIn.metrics.toolErrors);
});

test("maxTurns holds for gateway episodes: an agent looping 300 calls gets a kept, truncated episode of maxTurns steps", async () => {
  const engine = alwaysCalls();
  let sent = 0;
  const refusals: string[] = [];
  const looper =
    (rethrow: boolean): Agent<Row> =>
    async (r, ctx) => {
      const c = client(ctx, {
        maxRetries: 2,
        fetch: (url: string | URL | Request, init?: RequestInit) => (sent++, fetch(url, init)),
      });
      const messages: OpenAI.ChatCompletionMessageParam[] = [{ role: "user", content: r.prompt[0].content }];
      for (let i = 0; i < 300; i++) {
        try {
          const msg = (await c.chat.completions.create({ model: ctx.model, messages, tools: [lookupSchema] }))
            .choices[0].message;
          messages.push(msg);
          for (const call of msg.tool_calls ?? [])
            messages.push({ role: "tool", tool_call_id: call.id, content: "again" });
        } catch (e) {
          if (rethrow) throw e;
          refusals.push(`${(e as { status?: number }).status} ${(e as { code?: string }).code}`);
        }
      }
      return 1;
    };
  const res = await agentRollout(engine, (r, ctx) => looper(ctx.sampleIndex === 1)(r, ctx), [row("Loop forever.")], {
    n: 2,
    tokenizer: tok,
    maxTurns: 3,
    maxTotalTokens: 4096,
  });
  assert.equal(res.failed.length, 0, res.failed.map((t) => t.error?.message).join("; "));
  assert.equal(res.trajectories.length, 2, "both kept, the one that rethrew the refusal too");
  for (const t of res.trajectories) {
    assert.equal(t.endReason, "max_turns");
    assert.equal(t.steps.length, 3);
    assert.ok(t.steps.every((s) => s.toolCalls.every((c) => c.ok && c.text === "again")));
  }
  assert.deepEqual(
    res.trajectories.map((t) => t.reward),
    [1, 0],
  );
  assert.equal(res.metrics.endReasons.max_turns, 2);
  assert.equal(engine.calls.length, 6, "3 samples per episode, not 300");
  assert.equal(refusals.length, 297);
  assert.ok(refusals.every((r) => r === "400 max_turns_reached"));
  assert.equal(sent, 300 + 4, "no refusal was retried (300 + 3 + the refused one)");
});

test("an over-budget request gets 400 context_length_exceeded, the openai client does not retry it, and the episode is kept as truncated", async () => {
  const engine = alwaysCalls();
  let sent = 0;
  const errors: { status?: number; code?: string; type?: string }[] = [];
  const agent: Agent<Row> = async (r, ctx) => {
    const c = client(ctx, {
      maxRetries: 2,
      fetch: (url: string | URL | Request, init?: RequestInit) => (sent++, fetch(url, init)),
    });
    const messages: OpenAI.ChatCompletionMessageParam[] = [{ role: "user", content: r.prompt[0].content }];
    try {
      for (let i = 0; i < 3; i++) {
        const msg = (await c.chat.completions.create({ model: ctx.model, messages, tools: [lookupSchema] })).choices[0]
          .message;
        messages.push(msg);
        for (const call of msg.tool_calls ?? [])
          messages.push({ role: "tool", tool_call_id: call.id, content: "word ".repeat(400) });
      }
    } catch (e) {
      errors.push(e as { status?: number; code?: string; type?: string });
      if (ctx.sampleIndex === 1) throw e;
    }
    return 1;
  };
  const res = await agentRollout(engine, agent, [row("Look it up.")], {
    n: 2,
    tokenizer: tok,
    maxTotalTokens: 300,
    maxTokensPerTurn: 32,
  });
  assert.equal(res.failed.length, 0, res.failed.map((t) => t.error?.message).join("; "));
  assert.deepEqual(
    errors.map((e) => [e.status, e.code, e.type]),
    [
      [400, "context_length_exceeded", "invalid_request_error"],
      [400, "context_length_exceeded", "invalid_request_error"],
    ],
  );
  assert.equal(sent, 4, "one completion and one refused request per episode: nothing retried");
  assert.equal(engine.calls.length, 2);
  for (const t of res.trajectories) {
    assert.equal(t.endReason, "max_total_tokens");
    assert.equal(t.steps.length, 1);
    assert.deepEqual(
      t.steps[0].observation,
      [],
      "the observation nobody sampled from is left out, as in the built-in rollout",
    );
    assert.equal(t.steps[0].toolCalls[0].ok, true, "the tool result of the refused request is recorded");
  }
  assert.deepEqual(
    res.trajectories.map((t) => t.reward),
    [1, 0],
  );
  // A first request over the budget leaves nothing to keep: the episode fails, saying why.
  const tooLong = await agentRollout(
    engine,
    async (r, ctx) => (
      await client(ctx).chat.completions.create({
        model: ctx.model,
        messages: [{ role: "user", content: "word ".repeat(400) }],
      }),
      1
    ),
    [row("x")],
    { tokenizer: tok, maxTotalTokens: 300 },
  );
  assert.equal(tooLong.failed.length, 1);
  assert.match(
    tooLong.failed[0].error!.message,
    /400 .*at or over the episode's budget of 300|first request is \d+ tokens, at or over maxTotalTokens 300/,
  );
});

test("a non-finite reward is reported as NaN or Infinity, not null, with its row", async () => {
  const values: unknown[] = [Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY, { reward: Number.NaN }];
  const lines: string[] = [];
  const res = await agentRollout(
    new ScriptedEngine(tok, () => "ok<|im_end|>"),
    async (_r, ctx) => {
      await client(ctx).chat.completions.create({ model: ctx.model, messages: [{ role: "user", content: "hi" }] });
      return values[ctx.sampleIndex] as number;
    },
    [row("hi")],
    { n: values.length, tokenizer: tok, log: (l) => lines.push(l) },
  );
  assert.deepEqual(
    res.failed.map((t) => t.error!.message.replace(/, not a finite reward.*/, "")),
    [
      "the agent returned NaN",
      "the agent returned Infinity",
      "the agent returned -Infinity",
      "the agent returned { reward: NaN }",
    ],
  );
  assert.ok(!lines.join("\n").includes("null"));
  lines.forEach((l, i) => assert.match(l, new RegExp(`\\(row 1, sample ${i + 1}\\) failed: the agent returned`)));
});

test("a relative task.module is resolved against the recipe's directory, kept absolute, and found again from elsewhere", async () => {
  const root = tempDir("agent-r1-gateway-module-");
  mkdirSync(join(root, "agents"));
  mkdirSync(join(root, "recipes"));
  mkdirSync(join(root, "run"));
  // An agent module with no imports (it runs from a temporary directory): plain fetch, looping until refused.
  writeFileSync(
    join(root, "agents", "agent.mjs"),
    `export const rows = [{ prompt: [{ role: "user", content: "Loop." }] }];
export async function agent(row, ctx) {
  const messages = [{ role: "user", content: "Loop." }];
  for (let i = 0; i < 50; i++) {
    const res = await fetch(ctx.baseURL + "/chat/completions", {
      method: "POST",
      headers: { "Content-Type": "application/json", Authorization: "Bearer " + ctx.apiKey },
      body: JSON.stringify({ model: ctx.model, messages, tools: [${JSON.stringify(lookupSchema)}] }),
    });
    if (res.status !== 200) break;
    const msg = (await res.json()).choices[0].message;
    messages.push(msg);
    for (const call of msg.tool_calls ?? []) messages.push({ role: "tool", tool_call_id: call.id, content: "again" });
  }
  return 1;
}
`,
  );
  writeFileSync(
    join(root, "recipes", "recipe.yaml"),
    "task: { module: ../agents/agent.mjs }\nrollout: { n: 1, maxTurns: 2 }\n",
  );
  const cwd = process.cwd();
  let cfg: ReturnType<typeof loadConfig>;
  try {
    process.chdir(root); // not the recipe's directory
    cfg = loadConfig("recipes/recipe.yaml");
    assert.equal(cfg.task.module, join(root, "agents", "agent.mjs"));
    assert.equal(
      loadConfig(undefined, ["task.module=agents/agent.mjs"]).task.module,
      join(root, "agents", "agent.mjs"),
      "an override is taken from the current directory",
    );
    writeFileSync(join(root, "run", "config.yaml"), toYaml(cfg)); // what the trainer saves
  } finally {
    process.chdir(cwd);
  }
  // Resume reads the saved config from another directory (here the repository's).
  const again = loadConfig(join(root, "run", "config.yaml"));
  assert.equal(again.task.module, join(root, "agents", "agent.mjs"));
  const task = await loadTask(again.task);
  const res = await task.play!(alwaysCalls(), task.rows("train"), {
    n: 1,
    seed: 1,
    maxTurns: again.rollout.maxTurns,
    maxTokensPerTurn: 32,
    maxTotalTokens: 2048,
  });
  assert.equal(res.failed.length, 0, res.failed.map((t) => t.error?.message).join("; "));
  assert.equal(res.trajectories[0].endReason, "max_turns", "the recipe's maxTurns holds for a module's agent");
  assert.equal(res.trajectories[0].steps.length, 2);
});
