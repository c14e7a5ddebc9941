import { test } from "node:test";
import assert from "node:assert/strict";
import {
  COMPACT_CHAT_TEMPLATE,
  DEFAULT_CHAT_TEMPLATE,
  renderChatTemplate,
  type ChatMessage,
  type ToolSchema,
} from "../src/model/chat-template.js";
import { ModelFormatError } from "../src/util/errors.js";

const TOOLS: ToolSchema[] = [
  {
    type: "function",
    function: {
      name: "search",
      description: "Search the wiki.",
      parameters: { type: "object", properties: { query: { type: "string" } }, required: ["query"] },
    },
  },
  {
    type: "function",
    function: { name: "calculator", parameters: { type: "object", properties: { expression: { type: "string" } } } },
  },
];

test("system + user with generation prompt", () => {
  const out = renderChatTemplate(DEFAULT_CHAT_TEMPLATE, {
    messages: [
      { role: "system", content: "You are terse." },
      { role: "user", content: "Hi there" },
    ],
    addGenerationPrompt: true,
  });
  assert.equal(
    out,
    "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n",
  );
});

test("default system line when none is given; no generation prompt by default", () => {
  const out = renderChatTemplate(DEFAULT_CHAT_TEMPLATE, {
    messages: [
      { role: "user", content: "2+2?" },
      { role: "assistant", content: "4" },
    ],
  });
  assert.equal(
    out,
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n4<|im_end|>\n",
  );
});

test("tools block in the system prompt lists each tool as one JSON line", () => {
  const out = renderChatTemplate(DEFAULT_CHAT_TEMPLATE, {
    messages: [
      { role: "system", content: "Be useful." },
      { role: "user", content: "Q" },
    ],
    tools: TOOLS,
  });
  const system =
    "<|im_start|>system\nBe useful.\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n" +
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n" +
    '{"type": "function", "function": {"name": "search", "description": "Search the wiki.", "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}}}\n' +
    '{"type": "function", "function": {"name": "calculator", "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}}}}\n' +
    "</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n" +
    '<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call><|im_end|>\n';
  assert.equal(out, system + "<|im_start|>user\nQ<|im_end|>\n");
  for (const t of TOOLS)
    assert.ok(out.includes(`\n${JSON.stringify(t).replace(/,"/g, ', "').replace(/":/g, '": ')}\n`));

  // no system message: the default line heads the tools section
  const noSys = renderChatTemplate(DEFAULT_CHAT_TEMPLATE, { messages: [{ role: "user", content: "Q" }], tools: TOOLS });
  assert.ok(noSys.startsWith("<|im_start|>system\nYou are a helpful assistant.\n\n# Tools\n\n"));
  // an empty tools list behaves like none
  assert.ok(
    !renderChatTemplate(DEFAULT_CHAT_TEMPLATE, { messages: [{ role: "user", content: "Q" }], tools: [] }).includes(
      "# Tools",
    ),
  );
});

test("assistant tool calls and consecutive tool messages grouped into one user turn", () => {
  const messages: ChatMessage[] = [
    { role: "user", content: "Find X and compute 12 * (3 + 4)." },
    {
      role: "assistant",
      content: "<think>\nTwo calls.\n</think>",
      tool_calls: [
        { type: "function", function: { name: "search", arguments: { query: 'X "quoted"' } } },
        { function: { name: "calculator", arguments: '{"expression": "12 * (3 + 4)"}' } },
      ],
    },
    { role: "tool", name: "search", content: "X is a river." },
    { role: "tool", name: "calculator", content: "84" },
    { role: "assistant", content: "", tool_calls: [{ function: { name: "search", arguments: {} } }] },
    { role: "tool", content: "nothing" },
    { role: "assistant", content: "<answer>84</answer>" },
  ];
  const out = renderChatTemplate(DEFAULT_CHAT_TEMPLATE, { messages });
  const assistant1 =
    "<|im_start|>assistant\n<think>\nTwo calls.\n</think>\n" +
    '<tool_call>\n{"name": "search", "arguments": {"query": "X \\"quoted\\""}}\n</tool_call>\n' +
    '<tool_call>\n{"name": "calculator", "arguments": {"expression": "12 * (3 + 4)"}}\n</tool_call><|im_end|>\n';
  const tools1 =
    "<|im_start|>user\n<tool_response>\nX is a river.\n</tool_response>\n<tool_response>\n84\n</tool_response><|im_end|>\n";
  const assistant2 =
    '<|im_start|>assistant\n<tool_call>\n{"name": "search", "arguments": {}}\n</tool_call><|im_end|>\n';
  const tools2 = "<|im_start|>user\n<tool_response>\nnothing\n</tool_response><|im_end|>\n";
  const final = "<|im_start|>assistant\n<answer>84</answer><|im_end|>\n";
  const head =
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nFind X and compute 12 * (3 + 4).<|im_end|>\n";
  assert.equal(out, head + assistant1 + tools1 + assistant2 + tools2 + final);
  assert.equal(out.split("<|im_start|>user").length - 1, 3);
});

test("trailing tool messages close their turn before the generation prompt", () => {
  const out = renderChatTemplate(DEFAULT_CHAT_TEMPLATE, {
    messages: [
      { role: "user", content: "q" },
      { role: "tool", content: "a" },
      { role: "tool", content: "b" },
    ],
    addGenerationPrompt: true,
  });
  assert.ok(
    out.endsWith(
      "<|im_start|>user\n<tool_response>\na\n</tool_response>\n<tool_response>\nb\n</tool_response><|im_end|>\n<|im_start|>assistant\n",
    ),
  );
});

test("custom templates get bos/eos tokens and extra variables", () => {
  const tpl =
    "{{ bos_token }}{% for m in messages %}{{ m.role }}:{{ m.content }}{{ eos_token }}{% endfor %}{% if enable_thinking %}T{% endif %}";
  const out = renderChatTemplate(tpl, {
    messages: [{ role: "user", content: "a" }],
    bosToken: "<s>",
    eosToken: "</s>",
    extra: { enable_thinking: true, messages: "ignored" },
  });
  assert.equal(out, "<s>user:a</s>T");
});

test("template errors are ModelFormatErrors on tokenizer_config.json (chat_template)", () => {
  const isTemplateError = (e: unknown) =>
    e instanceof ModelFormatError && e.file === "tokenizer_config.json" && e.field === "chat_template";
  assert.throws(() => renderChatTemplate("{% if %}", { messages: [] }), isTemplateError);
  assert.throws(
    () => renderChatTemplate("{{ raise_exception('roles must alternate') }}", { messages: [] }),
    (e: unknown) => isTemplateError(e) && /roles must alternate/.test((e as Error).message),
  );
});

test("compact template: tools in a few lines; every turn renders exactly as in the default", () => {
  const messages: ChatMessage[] = [
    { role: "system", content: "Be useful." },
    { role: "user", content: "Q" },
    {
      role: "assistant",
      content: "<think>t</think>",
      tool_calls: [{ function: { name: "search", arguments: { query: "x" } } }],
    },
    { role: "tool", name: "search", content: "r1" },
    { role: "assistant", content: "<answer>a</answer>" },
  ];
  const compact = renderChatTemplate(COMPACT_CHAT_TEMPLATE, { messages, tools: TOOLS, addGenerationPrompt: true });
  const full = renderChatTemplate(DEFAULT_CHAT_TEMPLATE, { messages, tools: TOOLS, addGenerationPrompt: true });
  const system =
    "<|im_start|>system\nBe useful.\nTools:\n- search(query: string): Search the wiki.\n- calculator(expression: string)\n" +
    'Call one as <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call><|im_end|>\n';
  assert.ok(compact.startsWith(system), compact);
  const afterSystem = (s: string) => s.slice(s.indexOf("<|im_end|>\n") + "<|im_end|>\n".length);
  assert.equal(afterSystem(compact), afterSystem(full));
  assert.equal(
    renderChatTemplate(COMPACT_CHAT_TEMPLATE, { messages: messages.slice(0, 2) }),
    renderChatTemplate(DEFAULT_CHAT_TEMPLATE, { messages: messages.slice(0, 2) }),
    "without tools the two templates agree",
  );
});
