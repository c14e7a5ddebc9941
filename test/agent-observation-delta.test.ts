/**
 * Observation deltas from chat templates, checked byte for byte against
 * hand-written text and hand-built token sequences: ChatML (the shipped
 * template) and a Llama-3-style template, after a closed and an open action.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { chatSetup, type AgentMessage } from "../src/agent/chat-setup.js";
import { observationDeltaText, observationDeltaTokens } from "../src/agent/observation-delta.js";
import { ChatTemplateError } from "../src/agent/errors.js";
import { createHermesFormat } from "../src/agent/formats/hermes.js";
import { DEFAULT_CHAT_TEMPLATE } from "../src/model/chat-template.js";
import { chatmlTokenizer, llama3Tokenizer } from "../src/testing/index.js";

const history: AgentMessage[] = [
  { role: "system", content: "Be brief." },
  { role: "user", content: "6*7 and 2+2?" },
];
const results: AgentMessage[] = [
  { role: "tool", name: "calc", content: "42" },
  { role: "tool", name: "calc", content: "4" },
];

test("ChatML: after <|im_end|> the delta is the user turn of tool responses and the generation prompt", () => {
  const chat = chatSetup(chatmlTokenizer());
  const body =
    "\n<|im_start|>user\n<tool_response>\n42\n</tool_response>\n<tool_response>\n4\n</tool_response><|im_end|>\n<|im_start|>assistant\n";
  assert.equal(observationDeltaText(chat, { history, messages: results, actionClosed: true }), body);
  assert.equal(observationDeltaText(chat, { history, messages: results, actionClosed: false }), "<|im_end|>" + body);

  // Token ids: special and added tokens are single ids; the text between them is BPE.
  const tok = chat.tokenizer;
  const id = (t: string) => tok.tokenToId(t)!;
  const expected = [
    ...tok.encode("\n"),
    id("<|im_start|>"),
    ...tok.encode("user\n"),
    id("<tool_response>"),
    ...tok.encode("\n42\n"),
    id("</tool_response>"),
    ...tok.encode("\n"),
    id("<tool_response>"),
    ...tok.encode("\n4\n"),
    id("</tool_response>"),
    id("<|im_end|>"),
    ...tok.encode("\n"),
    id("<|im_start|>"),
    ...tok.encode("assistant\n"),
  ];
  assert.deepEqual(observationDeltaTokens(chat, { history, messages: results, actionClosed: true }), expected);
  assert.deepEqual(observationDeltaTokens(chat, { history, messages: results, actionClosed: false }), [
    id("<|im_end|>"),
    ...expected,
  ]);
});

test("ChatML: Hermes results as one user message render like tool messages", () => {
  const chat = chatSetup(chatmlTokenizer());
  const asUser = createHermesFormat({ results: "user" }).resultMessages([
    { name: "calc", text: "42" },
    { name: "calc", text: "4" },
  ]);
  assert.equal(
    observationDeltaText(chat, { history, messages: asUser, actionClosed: true }),
    observationDeltaText(chat, { history, messages: results, actionClosed: true }),
  );
});

test("ChatML: a user message and an empty observation", () => {
  const chat = chatSetup(chatmlTokenizer());
  assert.equal(
    observationDeltaText(chat, { history, messages: [{ role: "user", content: "Go on." }], actionClosed: true }),
    "\n<|im_start|>user\nGo on.<|im_end|>\n<|im_start|>assistant\n",
  );
  assert.equal(
    observationDeltaText(chat, { history: [], messages: [], actionClosed: false }),
    "<|im_end|>\n<|im_start|>assistant\n",
  );
});

test("Llama 3: results in role ipython, turns closed by <|eot_id|> with no newline", () => {
  const chat = chatSetup(llama3Tokenizer());
  assert.equal(chat.endOfTurn, "<|eot_id|>");
  const ipython: AgentMessage[] = [{ role: "ipython", content: "42" }];
  const body =
    "<|start_header_id|>ipython<|end_header_id|>\n\n42<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n";
  assert.equal(observationDeltaText(chat, { history, messages: ipython, actionClosed: true }), body);
  assert.equal(observationDeltaText(chat, { history, messages: ipython, actionClosed: false }), "<|eot_id|>" + body);
  const tok = chat.tokenizer;
  const id = (t: string) => tok.tokenToId(t)!;
  assert.deepEqual(observationDeltaTokens(chat, { history, messages: ipython, actionClosed: true }), [
    id("<|start_header_id|>"),
    ...tok.encode("ipython"),
    id("<|end_header_id|>"),
    ...tok.encode("\n\n42"),
    id("<|eot_id|>"),
    id("<|start_header_id|>"),
    ...tok.encode("assistant"),
    id("<|end_header_id|>"),
    ...tok.encode("\n\n"),
  ]);
});

test("templates that cannot give a delta fail with a typed, actionable error", () => {
  const tok = chatmlTokenizer();
  // Renders the last assistant turn without its end-of-turn token.
  const noEot =
    "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}{% if add_generation_prompt %}assistant: {% endif %}";
  assert.throws(
    () => observationDeltaText(chatSetup(tok, { template: noEot }), { history, messages: results, actionClosed: true }),
    (e: unknown) =>
      e instanceof ChatTemplateError && /does not end an assistant turn with '<\|im_end\|>'/.test(e.message),
  );
  // Closes the last assistant turn differently from one that has messages after it.
  const unstable = DEFAULT_CHAT_TEMPLATE.replace(
    `{{- "<|im_start|>" + message.role + "\\n" + message.content + "<|im_end|>\\n" -}}`,
    `{{- "<|im_start|>" + message.role + "\\n" + message.content + "<|im_end|>" + ("\\n" if loop.last else "") -}}`,
  );
  assert.notEqual(unstable, DEFAULT_CHAT_TEMPLATE);
  assert.throws(
    () =>
      observationDeltaText(chatSetup(tok, { template: unstable }), {
        history,
        messages: [{ role: "user", content: "x" }],
        actionClosed: true,
      }),
    /closes the assistant turn as "<\|im_end\|>\\n" when it is last but as "<\|im_end\|><" when messages follow/,
  );
  // Drops assistant content.
  const drops = "{% for m in messages %}{% if m.role != 'assistant' %}{{ m.content }}{% endif %}<|im_end|>{% endfor %}";
  assert.throws(
    () => observationDeltaText(chatSetup(tok, { template: drops }), { history, messages: [], actionClosed: true }),
    /exactly once; it rendered it not at all/,
  );
});

test("chatSetup refuses an end-of-turn text that is not one token", () => {
  assert.throws(() => chatSetup(chatmlTokenizer(), { endOfTurn: "</s>" }), /encodes to \d+ tokens, expected 1/);
});
