/** Tool-call formats: Hermes/Qwen and Llama 3.1 JSON parsing details (the shared suite runs in agent-conformance.test.ts). */
import { test } from "node:test";
import assert from "node:assert/strict";
import { hermesFormat } from "../src/agent/formats/hermes.js";
import { llama3JsonFormat } from "../src/agent/formats/llama3.js";
import { scanJsonObject, templateJson } from "../src/agent/formats/json-text.js";

test("hermes: calls among text, as Qwen writes them", () => {
  const text =
    '<think>\nneed two\n</think>\n<tool_call>\n{"name": "search", "arguments": {"query": "a"}}\n</tool_call>\n<tool_call>\n{"name": "calc", "arguments": "{\\"x\\": 1}"}\n</tool_call>';
  const p = hermesFormat.parse(text);
  assert.equal(p.content, "<think>\nneed two\n</think>");
  assert.deepEqual(
    p.calls.map((c) => c.ok && [c.name, c.arguments]),
    [
      ["search", { query: "a" }],
      ["calc", { x: 1 }],
    ],
  );
  assert.equal(p.calls[0].raw, '<tool_call>\n{"name": "search", "arguments": {"query": "a"}}\n</tool_call>');
});

test("hermes: each malformed call is its own error, the good ones still parse", () => {
  const p = hermesFormat.parse(
    '<tool_call>{"name": "a", "arguments": {}}</tool_call><tool_call>{"name": "b", "arguments": {</tool_call><tool_call>{"name": "c"}</tool_call><tool_call>\n</tool_call><tool_call>{"name": "d", "arguments": 5}</tool_call><tool_call>{"name": "e", "arguments": {}}',
  );
  assert.deepEqual(
    p.calls.map((c) => (c.ok ? `ok ${c.name}` : c.error.replace(/: .*/, ""))),
    [
      "ok a",
      "malformed JSON",
      'missing "arguments" (an object)',
      "empty <tool_call> block",
      '"arguments" must be an object',
      "<tool_call> is not closed with </tool_call>",
    ],
  );
  assert.deepEqual(
    p.calls.map((c) => (c.ok ? c.name : (c.name ?? null))),
    ["a", null, "c", null, "d", null],
  );
});

test("hermes: results are tool messages, in call order", () => {
  assert.deepEqual(
    hermesFormat.resultMessages([
      { name: "a", text: "1" },
      { name: null, text: "Error: x" },
    ]),
    [
      { role: "tool", name: "a", content: "1" },
      { role: "tool", content: "Error: x" },
    ],
  );
});

test("llama3: the turn is one or more JSON calls; plain text is an answer", () => {
  const one = llama3JsonFormat.parse(' {"name": "search", "parameters": {"query": "a"}}');
  assert.deepEqual(one.calls, [
    { ok: true, name: "search", arguments: { query: "a" }, raw: '{"name": "search", "parameters": {"query": "a"}}' },
  ]);
  const tagged = llama3JsonFormat.parse(
    '<|python_tag|>{"name": "a", "arguments": {"x": "}"}}; {"name": "b", "parameters": {}}',
  );
  assert.deepEqual(
    tagged.calls.map((c) => c.ok && [c.name, c.arguments]),
    [
      ["a", { x: "}" }],
      ["b", {}],
    ],
  );
  assert.deepEqual(llama3JsonFormat.parse("The answer is 4.").calls, []);
  const bad = llama3JsonFormat.parse('{"name": "a", "parameters": {"x": 1}');
  assert.deepEqual(
    bad.calls.map((c) => !c.ok && c.error),
    ["the JSON object is not closed"],
  );
  const wrong = llama3JsonFormat.parse('{"name": "a", "params": {}}');
  assert.deepEqual(
    wrong.calls.map((c) => !c.ok && c.error),
    ['missing "parameters" or "arguments" (an object)'],
  );
  assert.deepEqual(llama3JsonFormat.resultMessages([{ name: "a", text: "1" }]), [{ role: "ipython", content: "1" }]);
});

test("json-text helpers", () => {
  const obj = '{"a": "}\\"", "b": [1, {"c": 2}]}';
  assert.equal(scanJsonObject(`${obj} tail`, 0), obj.length);
  assert.equal(scanJsonObject(`x${obj}`, 1), obj.length + 1);
  assert.equal(scanJsonObject('{"a": [1}', 0), -1);
  assert.equal(scanJsonObject("{", 0), -1);
  assert.equal(
    templateJson({ a: [1, "x", { b: null }], c: true, d: undefined }),
    '{"a": [1, "x", {"b": null}], "c": true}',
  );
});
