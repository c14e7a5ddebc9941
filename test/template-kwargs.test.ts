/**
 * chat_template_kwargs (vLLM's and SGLang's field: more variables for the chat template, such as
 * Qwen3's enable_thinking) on `serve`'s chat completions and on the training gateway, with Qwen3's
 * own template (test/fixtures/qwen3-chat-template.jinja): the prompt is rendered with them; in the
 * gateway they are the episode's, the same in every request.
 */
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import OpenAI from "openai";
import { initModel } from "../src/model/init-model.js";
import { renderChatTemplate } from "../src/model/chat-template.js";
import { LocalEngine } from "../src/engine/local/local-engine.js";
import { startServer, type RunningServer } from "../src/serve/server.js";
import { agentRollout, type Agent } from "../src/gateway/agent-rollout.js";
import { chatSetup } from "../src/agent/chat-setup.js";
import { stepContext } from "../src/agent/trajectory.js";
import { ScriptedEngine, chatmlTokenizer } from "../src/testing/index.js";
import { repoRoot } from "./repo-root.js";
import { tempDir } from "./helpers.js";

const QWEN3_TEMPLATE = readFileSync(join(repoRoot(), "test", "fixtures", "qwen3-chat-template.jinja"), "utf8");
const messages = [{ role: "user" as const, content: "What is 2+3?" }];
const EMPTY_THINK = "<think>\n\n</think>\n\n";

let engine: LocalEngine, server: RunningServer, client: OpenAI;

before(async () => {
  const dir = join(tempDir("agent-r1-kwargs-"), "tiny");
  await initModel({ preset: "tiny", out: dir });
  const cfgFile = join(dir, "tokenizer_config.json");
  const cfg = JSON.parse(readFileSync(cfgFile, "utf8")) as Record<string, unknown>;
  writeFileSync(cfgFile, JSON.stringify({ ...cfg, chat_template: QWEN3_TEMPLATE }));
  engine = await LocalEngine.load(dir, { workers: 0 });
  server = await startServer({ engine, port: 0 });
  client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "unused", maxRetries: 0 });
});

after(async () => {
  await server?.close();
  await engine?.dispose();
});

/** Prompt tokens of Qwen3's template over `messages` with these variables. */
const promptTokens = (vars: Record<string, unknown>) =>
  engine.tokenizer.encode(renderChatTemplate(QWEN3_TEMPLATE, { messages, addGenerationPrompt: true, extra: vars }))
    .length;

test("serve: chat_template_kwargs reach the template (Qwen3's enable_thinking: false adds an empty think block)", async () => {
  const ask = (kwargs?: Record<string, unknown>) =>
    client.chat.completions.create({
      model: "tiny",
      messages,
      max_tokens: 2,
      temperature: 0,
      ...(kwargs ? { chat_template_kwargs: kwargs } : {}),
    } as OpenAI.ChatCompletionCreateParamsNonStreaming);
  const plain = await ask();
  const off = await ask({ enable_thinking: false });
  const on = await ask({ enable_thinking: true });
  assert.equal(plain.usage!.prompt_tokens, promptTokens({}));
  assert.equal(off.usage!.prompt_tokens, promptTokens({ enable_thinking: false }));
  assert.equal(on.usage!.prompt_tokens, plain.usage!.prompt_tokens);
  assert.equal(off.usage!.prompt_tokens - plain.usage!.prompt_tokens, engine.tokenizer.encode(EMPTY_THINK).length);
  const bad = await fetch(`${server.url}/v1/chat/completions`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ messages, chat_template_kwargs: ["enable_thinking"] }),
  });
  assert.equal(bad.status, 400);
  assert.match(((await bad.json()) as { error: { message: string } }).error.message, /chat_template_kwargs/);
});

test("gateway: the first request's chat_template_kwargs are the episode's; a later request must send the same", async () => {
  const tok = chatmlTokenizer();
  const chat = chatSetup(tok, { template: QWEN3_TEMPLATE });
  const scripted = new ScriptedEngine(tok, () => "5<|im_end|>");
  const agent =
    (second: Record<string, unknown>): Agent<{ q: string }> =>
    async (row, ctx) => {
      const c = new OpenAI({ baseURL: ctx.baseURL, apiKey: ctx.apiKey, maxRetries: 0 });
      const ask = (m: OpenAI.ChatCompletionMessageParam[], kwargs: Record<string, unknown>) =>
        c.chat.completions.create({
          model: ctx.model,
          messages: m,
          chat_template_kwargs: kwargs,
        } as OpenAI.ChatCompletionCreateParamsNonStreaming);
      const first = [{ role: "user" as const, content: row.q }];
      const a = await ask(first, { enable_thinking: false });
      await ask([...first, a.choices[0].message, { role: "user", content: "Sure?" }], second);
      return 1;
    };
  const same = await agentRollout(scripted, agent({ enable_thinking: false }), [{ q: "What is 2+3?" }], {
    n: 1,
    tokenizer: tok,
    chat,
  });
  assert.equal(same.failed.length, 0, same.failed.map((t) => t.error?.message).join("\n"));
  const t = same.trajectories[0];
  assert.ok(tok.decode(stepContext(t, 0)).endsWith(`<|im_start|>assistant\n${EMPTY_THINK}`), "the empty think block");
  const changed = await agentRollout(scripted, agent({ enable_thinking: true }), [{ q: "What is 2+3?" }], {
    n: 1,
    tokenizer: tok,
    chat,
  });
  assert.equal(changed.failed.length, 1);
  assert.match(
    changed.failed[0].error!.message,
    /chat_template_kwargs \{"enable_thinking":true\} differ from the episode's/,
  );
});
