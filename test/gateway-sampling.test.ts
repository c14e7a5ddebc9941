/**
 * The recipe's sampling wins over what an agent's requests ask for (a framework that sends
 * temperature 0 would make every GRPO group constant): temperature, top-p and the per-turn token
 * limit come from the rollout options, the run says so once, and `agentSampling: "agent"` lets the
 * request win. A scripted model: the model is not the point.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import OpenAI from "openai";
import { agentRollout, type Agent } from "../src/gateway/agent-rollout.js";
import { ScriptedEngine, chatmlTokenizer } from "../src/testing/index.js";

const tok = chatmlTokenizer();
const row = { prompt: [{ role: "user", content: "hi" }], reward_model: { ground_truth: "" } };

/** An agent that asks, as Mastra does, for temperature 0, and for more tokens than the recipe allows. */
const greedyAgent: Agent<typeof row> = async (_row, ctx) => {
  const client = new OpenAI({ baseURL: ctx.baseURL, apiKey: ctx.apiKey, maxRetries: 0 });
  await client.chat.completions.create({
    model: ctx.model,
    messages: [{ role: "user", content: "hi" }],
    temperature: 0,
    top_p: 0.5,
    max_tokens: 500,
  });
  const r = await client.responses.create({ model: ctx.model, input: "again", temperature: 0, max_output_tokens: 9 });
  return r.output_text.length > 0 ? 1 : 0;
};

test("an agent asking for temperature 0 and max_tokens above the recipe's gets the recipe's values; the run says so once", async () => {
  const engine = new ScriptedEngine(tok, () => "fine<|im_end|>");
  const lines: string[] = [];
  const said = new Set<string>();
  const opts = {
    n: 2,
    tokenizer: tok,
    temperature: 0.8,
    topP: 0.9,
    maxTokensPerTurn: 32,
    log: (l: string) => lines.push(l),
    said,
  };
  for (let i = 0; i < 2; i++) {
    const res = await agentRollout(engine, greedyAgent, [row], opts);
    assert.equal(res.trajectories.length, 2, JSON.stringify(res.failed.map((t) => t.error)));
  }
  assert.equal(engine.calls.length, 8);
  for (const c of engine.calls) {
    assert.equal(c.params.temperature, 0.8);
    assert.equal(c.params.topP, 0.9);
  }
  // A larger max_tokens is capped at the recipe's; a smaller one is kept.
  assert.deepEqual(
    engine.calls.map((c) => c.params.maxTokens),
    engine.calls.map((c) => (c.text.includes("again") ? 9 : 32)),
  );
  const notes = lines.filter((l) => l.startsWith("an agent asked for"));
  assert.equal(notes.length, 3, lines.join("\n")); // temperature, top_p, max_tokens: once each over two rollouts
  assert.ok(
    notes.some((l) => /temperature 0 \(OpenAI\/JS [^)]*\): the recipe's rollout\.temperature 0\.8 was used/.test(l)),
    notes.join("\n"),
  );
  assert.ok(notes.some((l) => /max_tokens 500 .*rollout\.maxTokensPerTurn 32/.test(l)));
  assert.ok(notes.every((l) => l.includes("rollout.agentSampling: agent")));
});

test("agentSampling agent: the request's temperature, top-p and max_tokens win", async () => {
  const engine = new ScriptedEngine(tok, () => "fine<|im_end|>");
  const lines: string[] = [];
  const res = await agentRollout(engine, greedyAgent, [row], {
    n: 1,
    tokenizer: tok,
    temperature: 0.8,
    maxTokensPerTurn: 32,
    agentSampling: "agent",
    log: (l) => lines.push(l),
  });
  assert.equal(res.trajectories.length, 1);
  assert.deepEqual(
    engine.calls.map((c) => [c.params.temperature, c.params.maxTokens]),
    [
      [0, 500],
      [0, 9],
    ],
  );
  assert.equal(engine.calls[0].params.topP, 0.5);
  assert.deepEqual(lines, []);
});

test("response_format json_schema through the gateway is a 400 naming it, never ignored in silence", async () => {
  const engine = new ScriptedEngine(tok, () => "fine<|im_end|>");
  const statuses: unknown[] = [];
  const agent: Agent<typeof row> = async (_row, ctx) => {
    const client = new OpenAI({ baseURL: ctx.baseURL, apiKey: ctx.apiKey, maxRetries: 0 });
    try {
      await client.chat.completions.create({
        model: ctx.model,
        messages: [{ role: "user", content: "hi" }],
        response_format: { type: "json_schema", json_schema: { name: "a", schema: { type: "object" } } },
      });
    } catch (e) {
      const err = e as { status?: number; param?: string };
      statuses.push([err.status, err.param]);
    }
    await client.chat.completions.create({ model: ctx.model, messages: [{ role: "user", content: "hi" }] });
    return 1;
  };
  const res = await agentRollout(engine, agent, [row], { n: 1, tokenizer: tok });
  assert.deepEqual(statuses, [[400, "response_format"]]);
  assert.equal(res.trajectories.length, 1);
  assert.equal(engine.calls.length, 1, "the refused request sampled nothing");
});

test("stop strings the agent sends are honoured beside the recipe's: the answer ends before the stop, the action keeps it, one segment", async () => {
  const engine = new ScriptedEngine(tok, (c) =>
    c.index === 0 ? "Thought: add END ignored<|im_end|>" : "done<|im_end|>",
  );
  const agent: Agent<typeof row> = async (_row, ctx) => {
    const client = new OpenAI({ baseURL: ctx.baseURL, apiKey: ctx.apiKey, maxRetries: 0 });
    const messages: OpenAI.ChatCompletionMessageParam[] = [{ role: "user", content: "hi" }];
    const first = await client.chat.completions.create({ model: ctx.model, messages, stop: ["END"] });
    assert.equal(first.choices[0].message.content, "Thought: add ");
    messages.push(first.choices[0].message, { role: "user", content: "go on" });
    const second = await client.chat.completions.create({ model: ctx.model, messages, stop: "END" });
    return second.choices[0].message.content === "done" ? 1 : 0;
  };
  const res = await agentRollout(engine, agent, [row], { n: 1, tokenizer: tok });
  assert.equal(res.failed.length, 0, res.failed.map((t) => t.error?.message).join("; "));
  const t = res.trajectories[0];
  assert.equal(t.reward, 1);
  assert.deepEqual(engine.calls[0].params.stop?.slice(1), ["END"]);
  assert.equal(tok.decode(t.steps[0].action), "Thought: add END", "the action is what was sampled, stop included");
  assert.equal(res.segmentReasons.get(t.id), undefined, "the answer without its stop extends the episode");
});
