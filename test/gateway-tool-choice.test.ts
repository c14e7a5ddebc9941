/**
 * tool_choice "required" and a named function: the call format's opening is forced after the
 * generation prompt, the answer is that opening followed by the sample, and on the gateway the
 * forced tokens are observation (weight 0: in the context, never in an action), so one episode stays
 * one segment. A scripted model where the model is not the point; the tiny model on `serve`.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import OpenAI from "openai";
import { agentRollout, type Agent } from "../src/gateway/agent-rollout.js";
import { segments, stepContext } from "../src/agent/trajectory.js";
import { forcedOpening, parseToolChoice } from "../src/serve/tool-choice.js";
import { startServer } from "../src/serve/server.js";
import { initModel } from "../src/model/init-model.js";
import { ScriptedEngine, chatmlTokenizer } from "../src/testing/index.js";
import { tempDir } from "./helpers.js";

const tok = chatmlTokenizer();
const row = { question: "Upper-case the word 'loop' with the tool." };
const lookup: OpenAI.ChatCompletionTool = {
  type: "function",
  function: { name: "lookup", parameters: { type: "object", properties: { word: { type: "string" } } } },
};

test("parseToolChoice: auto, none, required, a function by name (chat or Responses shape); anything else a 400 naming tool_choice", () => {
  assert.equal(parseToolChoice(undefined, ["f"]), "auto");
  assert.equal(parseToolChoice("required", ["f"]), "required");
  assert.deepEqual(parseToolChoice({ type: "function", function: { name: "f" } }, ["f"]), { name: "f" });
  assert.deepEqual(parseToolChoice({ type: "function", name: "f" }, ["f"]), { name: "f" });
  for (const bad of ["required", { type: "function", name: "g" }, "sometimes", { type: "allowed_tools" }])
    assert.throws(
      () => parseToolChoice(bad, bad === "required" ? [] : ["f"]),
      (e: { status?: number; opts?: { param?: string } }) => e.status === 400 && e.opts?.param === "tool_choice",
    );
  assert.equal(forcedOpening("required"), '<tool_call>\n{"name": "');
  assert.equal(forcedOpening({ name: "f" }), '<tool_call>\n{"name": "f", "arguments": ');
  assert.equal(forcedOpening("auto"), "");
});

for (const [label, choice, reply] of [
  ["required", "required", 'lookup", "arguments": {"word": "loop"}}\n</tool_call><|im_end|>'],
  ["a named function", { type: "function", function: { name: "lookup" } }, '{"word": "loop"}}\n</tool_call><|im_end|>'],
] as const) {
  test(`gateway, tool_choice ${label}: the call comes back, and its forced opening is observation, not action`, async () => {
    const engine = new ScriptedEngine(tok, (c) => (c.index % 2 === 0 ? reply : "LOOP<|im_end|>"));
    const agent: Agent<typeof row> = async (r, ctx) => {
      const client = new OpenAI({ baseURL: ctx.baseURL, apiKey: ctx.apiKey, maxRetries: 0 });
      const messages: OpenAI.ChatCompletionMessageParam[] = [{ role: "user", content: r.question }];
      const first = await client.chat.completions.create({
        model: ctx.model,
        messages,
        tools: [lookup],
        tool_choice: choice as OpenAI.ChatCompletionToolChoiceOption,
      });
      const call = first.choices[0].message.tool_calls?.[0];
      assert.ok(call && call.type === "function", JSON.stringify(first.choices[0].message));
      assert.equal(call.function.name, "lookup");
      assert.deepEqual(JSON.parse(call.function.arguments), { word: "loop" });
      messages.push(first.choices[0].message, { role: "tool", tool_call_id: call.id, content: "LOOP" });
      const second = await client.chat.completions.create({ model: ctx.model, messages, tools: [lookup] });
      return second.choices[0].message.content === "LOOP" ? 1 : 0;
    };
    const res = await agentRollout(engine, agent, [row], { n: 1, tokenizer: tok });
    assert.equal(res.failed.length, 0, res.failed.map((t) => t.error?.message).join("; "));
    const t = res.trajectories[0];
    assert.equal(t.reward, 1);
    assert.equal(segments(t).length, 1, "one segment: the forced tokens continue the episode");
    const forced = tok.encode(forcedOpening(parseToolChoice(choice, ["lookup"])));
    const ctx0 = stepContext(t, 0);
    assert.deepEqual(ctx0.slice(-forced.length), forced, "the first context ends with the forced opening");
    assert.deepEqual(t.steps[0].action, tok.encode(reply), "the action is only what the model sampled");
    assert.equal(engine.calls[0].text.endsWith(forcedOpening(parseToolChoice(choice, ["lookup"]))), true);
    assert.equal(t.steps[0].toolCalls[0].ok, true);
    assert.equal(t.steps[0].toolCalls[0].text, "LOOP");
  });
}

test("serve, tool_choice a named function on the tiny model: the answer starts with that function's call", async () => {
  const dir = join(tempDir("agent-r1-tool-choice-"), "tiny");
  await initModel({ preset: "tiny", out: dir });
  const server = await startServer({ model: dir, port: 0, log: () => {} });
  try {
    const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "x", maxRetries: 0 });
    const r = await client.chat.completions.create({
      model: server.modelId,
      messages: [{ role: "user", content: "Look up loop." }],
      tools: [lookup],
      tool_choice: { type: "function", function: { name: "lookup" } },
      max_tokens: 8,
      temperature: 0,
    });
    const m = r.choices[0].message;
    // A random model rarely closes the call: then the forced opening and its sample are the content.
    const started = m.tool_calls?.[0]?.type === "function" ? m.tool_calls[0].function.name === "lookup" : false;
    assert.ok(started || m.content?.startsWith('<tool_call>\n{"name": "lookup", "arguments": '), JSON.stringify(m));
    const bad = await fetch(`${server.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ messages: [{ role: "user", content: "x" }], tool_choice: "required" }),
    });
    assert.equal(bad.status, 400);
    assert.equal(((await bad.json()) as { error: { param: string } }).error.param, "tool_choice");
  } finally {
    await server.close();
  }
});
