/**
 * Episodes never mix. An agent whose OpenAI client is made once and shared by every episode (a
 * module-level client, or one its framework caches from the first episode, as the Agents SDK's
 * setDefaultOpenAIClient does) still reaches each agent's own episode (episode-fetch.ts); one that
 * holds a fetch the gateway cannot reroute sends other rows' conversations to one episode's URL, and
 * then no trajectory may hold another row's conversation: the episodes it reached fail whole with a
 * message that says how to fix it. A client's retry of an answer it did not receive is answered
 * again, sampled and recorded once. A scripted model: the model is not the point.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import OpenAI from "openai";
import { agentRollout, type Agent } from "../src/gateway/agent-rollout.js";
import { Gateway } from "../src/gateway/gateway.js";
import { chatSetup } from "../src/agent/chat-setup.js";
import { finalTokens, type Trajectory } from "../src/agent/trajectory.js";
import { originalFetch, reroute } from "../src/gateway/episode-fetch.js";
import { Agent as SdkAgent, run, setDefaultOpenAIClient, setTracingDisabled } from "@openai/agents";
import { ScriptedEngine, chatmlTokenizer } from "../src/testing/index.js";

const tok = chatmlTokenizer();
const questions = ["What is the capital of France?", "How many legs has a spider?", "Who wrote Hamlet, and when?"];
const rows = questions.map((q) => ({ question: q }));

/** An agent whose client is the first episode's, kept for all (as a cached default client is); `fetch` as given. */
function sharedClientAgent(fetchFn?: typeof fetch): Agent<{ question: string }> {
  let shared: OpenAI | undefined;
  return async (row, ctx) => {
    shared ??= new OpenAI({ baseURL: ctx.baseURL, apiKey: ctx.apiKey, ...(fetchFn ? { fetch: fetchFn } : {}) });
    for (let turn = 0; turn < 2; turn++)
      await shared.chat.completions.create({
        model: ctx.model,
        messages: [
          { role: "user", content: row.question },
          ...(turn
            ? [
                { role: "assistant" as const, content: "an answer" },
                { role: "user" as const, content: "Sure?" },
              ]
            : []),
        ],
      });
    return 1;
  };
}

/** Each trajectory's tokens hold its own row's question and no other's. */
function assertOwnRows(res: { trajectories: Trajectory[] }): void {
  for (const t of res.trajectories) {
    const text = tok.decode(finalTokens(t));
    for (const [i, q] of questions.entries())
      assert.equal(text.includes(q), i === t.rowIndex, `trajectory ${t.id} (row ${t.rowIndex}) and row ${i}: ${text}`);
  }
}

test("a client shared by every episode reaches each agent's own episode: every episode kept, each with its own row", async () => {
  const engine = new ScriptedEngine(tok, () => "an answer<|im_end|>", { delayMs: 20 });
  const res = await agentRollout(engine, sharedClientAgent(), rows, { n: 2, tokenizer: tok });
  assert.equal(res.failed.length, 0, res.failed.map((t) => t.error?.message).join("\n"));
  assert.equal(res.trajectories.length, 6);
  assertOwnRows(res);
  for (const t of res.trajectories) assert.equal(t.steps.length, 2, t.id);
});

test("the OpenAI Agents SDK with setDefaultOpenAIClient, set once by the first episode: each run reaches its own episode", async () => {
  setTracingDisabled(true);
  const engine = new ScriptedEngine(tok, () => "Paris, probably.<|im_end|>", { delayMs: 10 });
  let set = false;
  const agent: Agent<{ question: string }> = async (row, ctx) => {
    if (!set) {
      setDefaultOpenAIClient(new OpenAI({ baseURL: ctx.baseURL, apiKey: ctx.apiKey }));
      set = true;
    }
    const result = await run(
      new SdkAgent({ name: "answerer", instructions: "Answer briefly.", model: ctx.model }),
      row.question,
    );
    return result.finalOutput ? 1 : 0;
  };
  const res = await agentRollout(engine, agent, rows, { n: 2, tokenizer: tok });
  assert.equal(res.failed.length, 0, res.failed.map((t) => t.error?.message).join("\n"));
  assert.equal(res.trajectories.length, 6);
  assertOwnRows(res);
});

test("a shared client that holds the fetch from before the gateway loaded: no trajectory holds another row's conversation; each failure says how to fix it", async () => {
  const engine = new ScriptedEngine(tok, () => "an answer<|im_end|>", { delayMs: 20 });
  const res = await agentRollout(engine, sharedClientAgent(originalFetch()), rows, { n: 2, tokenizer: tok });
  assertOwnRows(res);
  // Whichever way its requests land (another row's conversation at a live episode, a second request
  // while one runs, an episode already gone), each failure says what to change.
  assert.ok(res.failed.length >= 3, `${res.failed.length} failed: mixing went unnoticed`);
  for (const t of res.failed)
    assert.match(t.error?.message ?? "", /make the client inside agent\(\) from ctx\.baseURL and ctx\.apiKey/);
});

test("the same agent with a client made inside agent(): every episode is kept, each with its own row", async () => {
  const engine = new ScriptedEngine(tok, () => "an answer<|im_end|>", { delayMs: 5 });
  const agent: Agent<{ question: string }> = async (row, ctx) => {
    const client = new OpenAI({ baseURL: ctx.baseURL, apiKey: ctx.apiKey, maxRetries: 0 });
    await client.chat.completions.create({ model: ctx.model, messages: [{ role: "user", content: row.question }] });
    // An unrelated side conversation of the same episode is a new segment, not a mix.
    await client.chat.completions.create({ model: ctx.model, messages: [{ role: "user", content: "Say hi." }] });
    return 1;
  };
  const lines: string[] = [];
  const said = new Set<string>();
  for (let i = 0; i < 2; i++) {
    const res = await agentRollout(engine, agent, rows, { n: 4, tokenizer: tok, log: (l) => lines.push(l), said });
    assert.equal(res.failed.length, 0, JSON.stringify(res.failed.map((t) => t.error)));
    assert.equal(res.trajectories.length, 12);
    for (const t of res.trajectories) assert.deepEqual(res.segmentReasons.get(t.id)?.length, 1);
    // Counted for metrics.jsonl (gateway_requests, gateway_segments_<reason>).
    assert.deepEqual(res.metrics.gateway, { requests: 24, segments: { history_shortened: 12 }, replays: 0 });
  }
  // Half the requests rewrote the conversation: said once per run, not per rollout.
  const notes = lines.filter((l) => /rewrote the conversation/.test(l));
  assert.equal(notes.length, 1, lines.join("\n"));
  assert.match(notes[0], /^12 of 24 agent requests \(50 %\) .*\(history_shortened 12\)/);
});

test("a client's retry of an answer it did not receive gets the same answer, sampled and recorded once", async () => {
  const engine = new ScriptedEngine(tok, (c) => `answer ${c.index}<|im_end|>`);
  const gateway = await new Gateway({
    chat: chatSetup(tok),
    engine,
    maxTokensPerTurn: 16,
    maxTotalTokens: 256,
    temperature: 1,
  }).start();
  try {
    const ep = gateway.open({ rowIndex: 0, sampleIndex: 0, row: rows[0] });
    const client = new OpenAI({ baseURL: ep.baseURL, apiKey: ep.apiKey, maxRetries: 0 });
    const ask = () =>
      client.chat.completions.create({ model: "policy", messages: [{ role: "user", content: questions[0] }] });
    const a = await ask();
    const b = await ask();
    assert.equal(b.choices[0].message.content, a.choices[0].message.content);
    assert.equal(engine.calls.length, 1);
    assert.equal(ep.recorder.replays, 1);
    const t = ep.recorder.finish(1)!;
    assert.equal(t.steps.length, 1);
  } finally {
    await gateway.stop();
  }
});

test("reroute: another episode's URL on a gateway of this process becomes this episode's; anything else is left alone", () => {
  const route = { baseURL: "http://127.0.0.1:9/episodes/e1-0-ab/v1", apiKey: "k" };
  const known = new Set(["http://127.0.0.1:9", "http://127.0.0.1:7"]);
  assert.equal(
    reroute("http://127.0.0.1:9/episodes/e0-0-cd/v1/chat/completions", route, known),
    "http://127.0.0.1:9/episodes/e1-0-ab/v1/chat/completions",
  );
  // An earlier iteration's gateway (a client made then holds its address).
  assert.equal(
    reroute("http://127.0.0.1:7/episodes/e0-0-cd/v1/responses", route, known),
    "http://127.0.0.1:9/episodes/e1-0-ab/v1/responses",
  );
  assert.equal(
    reroute("http://127.0.0.1:9/episodes/e0-0-cd/v1", route, known),
    "http://127.0.0.1:9/episodes/e1-0-ab/v1",
  );
  assert.equal(reroute("http://127.0.0.1:9/episodes/e1-0-ab/v1/responses", route, known), undefined);
  assert.equal(reroute("http://127.0.0.1:19/episodes/e0-0-cd/v1/responses", route, known), undefined);
  assert.equal(reroute("http://127.0.0.1:9/v1/chat/completions", route, known), undefined);
  assert.equal(reroute("https://api.example/episodes/e0-0-cd/v1/responses", route, known), undefined);
  assert.equal(reroute("http://127.0.0.1:9/episodes/../v1/x", route, known), undefined);
});
