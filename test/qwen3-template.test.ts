/**
 * The real Qwen3 chat template renders exactly as Hugging Face transformers renders it.
 *
 * test/fixtures/qwen3-chat-template.jinja is Qwen3's `chat_template` verbatim, as vendored by llama.cpp in
 * models/templates/Qwen-Qwen3-0.6B.jinja (the template of Qwen/Qwen3-0.6B's tokenizer_config.json at release).
 * test/fixtures/qwen3-chat-expected.json holds the cases (inputs) and, in "expected", transformers'
 * rendering of each, made with Python jinja2 the way apply_chat_template does. After editing the
 * inputs (or the template), regenerate the expected strings with:
 *
 *   python3 scripts/hf-chat-render.py test/fixtures/qwen3-chat-template.jinja test/fixtures/qwen3-chat-expected.json --write
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { renderChatTemplate, type ChatMessage, type ToolSchema } from "../src/model/chat-template.js";
import { encodeChat, renderChat } from "../src/model/chat.js";
import { trainByteLevelBpe } from "../src/model/bpe-trainer.js";
import { Tokenizer } from "../src/model/tokenizer.js";
import { repoRoot } from "./repo-root.js";

interface Case {
  name: string;
  /** As transformers takes them: may carry fields our ChatMessage type does not name (reasoning_content). */
  messages: ChatMessage[];
  tools?: ToolSchema[];
  add_generation_prompt?: boolean;
  /** Extra template variables (apply_chat_template's **kwargs), e.g. enable_thinking. */
  kwargs?: Record<string, unknown>;
  expected: string;
}

const fixtures = join(repoRoot(), "test", "fixtures");
const TEMPLATE = readFileSync(join(fixtures, "qwen3-chat-template.jinja"), "utf8");
const CASES = JSON.parse(readFileSync(join(fixtures, "qwen3-chat-expected.json"), "utf8")) as Case[];

function render(c: Case): string {
  return renderChatTemplate(TEMPLATE, {
    messages: c.messages,
    tools: c.tools,
    addGenerationPrompt: c.add_generation_prompt ?? false,
    extra: c.kwargs,
  });
}

test("the fixtures cover thinking on/off, tools, tool calls and responses, <think> and reasoning_content", () => {
  assert.ok(TEMPLATE.includes("ns.multi_step_tool") && TEMPLATE.includes("enable_thinking"));
  const all = CASES.map((c) => c.expected).join("");
  for (const needle of [
    "<tools>\n{",
    "<tool_call>\n{",
    "<tool_response>\n",
    "<think>\n\n</think>\n\n",
    "<think>\nGot it.",
  ])
    assert.ok(all.includes(needle), needle);
  assert.ok(CASES.length >= 10);
});

for (const c of CASES) {
  test(`Qwen3 template as in transformers: ${c.name}`, () => {
    assert.equal(render(c), c.expected);
  });
}

test("Qwen3 template through a model's tokenizer_config.json: renderChat and encodeChat", () => {
  const c = CASES.find((x) => x.name.startsWith("c:"));
  assert.ok(c);
  const dir = mkdtempSync(join(tmpdir(), "qwen3-template-"));
  try {
    const tokenizerJson = trainByteLevelBpe(Array(20).fill(c.expected), {
      vocabSize: 320,
      specialTokens: ["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
      addedTokens: ["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<think>", "</think>"],
    });
    writeFileSync(join(dir, "tokenizer.json"), JSON.stringify(tokenizerJson));
    writeFileSync(
      join(dir, "tokenizer_config.json"),
      JSON.stringify({ bos_token: null, eos_token: "<|im_end|>", pad_token: "<|endoftext|>", chat_template: TEMPLATE }),
    );
    const tok = Tokenizer.fromDir(dir);
    assert.equal(tok.chatTemplate, TEMPLATE);
    const opts = { tools: c.tools, addGenerationPrompt: c.add_generation_prompt ?? false };
    assert.equal(renderChat(tok, c.messages, opts), c.expected);
    assert.equal(tok.decode(encodeChat(tok, c.messages, opts)), c.expected);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
