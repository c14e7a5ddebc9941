/**
 * The tool-call format conformance suite: every ToolCallFormat runs it, from a node:test file.
 * Written calls parse back to themselves (alone and several per turn), text
 * without calls has none, and no input (garbage, or any prefix of a valid
 * call) makes the parser throw or invent arguments.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import type { ToolCallFormat } from "../agent/formats/types.js";

const CALLS = [
  { name: "search", arguments: { query: 'river "Kalomi" <b>&</b>', limit: 3 } },
  {
    name: "calc",
    arguments: { expression: "12 * (3 + 4)", nested: { list: [1, 2.5, null, true], text: "é ü 中文 \n tab\t" } },
  },
  { name: "noargs", arguments: {} },
];

export function formatConformance(format: ToolCallFormat): void {
  const name = `format '${format.name}' [format conformance]`;

  test(`${name}: a written call parses back to itself`, () => {
    for (const c of CALLS) {
      const parsed = format.parse(format.write(c));
      assert.equal(parsed.calls.length, 1, format.write(c));
      assert.deepEqual(parsed.calls[0], { ok: true, name: c.name, arguments: c.arguments, raw: parsed.calls[0].raw });
      assert.equal(parsed.content, "");
    }
  });

  test(`${name}: several calls in one turn parse in order`, () => {
    const parsed = format.parse(format.join(CALLS.map((c) => format.write(c))));
    assert.deepEqual(
      parsed.calls.map((c) => (c.ok ? [c.name, c.arguments] : c.error)),
      CALLS.map((c) => [c.name, c.arguments]),
    );
  });

  test(`${name}: text without calls has none`, () => {
    for (const text of ["", "The answer is <answer>42</answer>.", "Let me think.\nNo tools needed."])
      assert.deepEqual(format.parse(text).calls, []);
  });

  test(`${name}: never throws; malformed calls are errors, never {} arguments`, () => {
    const written = format.write(CALLS[1]);
    for (let i = 0; i <= written.length; i++) {
      const parsed = format.parse(written.slice(0, i));
      for (const c of parsed.calls) {
        if (c.ok)
          assert.deepEqual(
            c.arguments,
            CALLS[1].arguments,
            `prefix ${JSON.stringify(written.slice(0, i))} parsed to other arguments`,
          );
        else assert.ok(c.error.length > 0);
      }
    }
    for (const junk of ["{", "{}", '{"name": "x"}', '{"name": "x", "arguments": 5, "parameters": 5}', "\u0000", "}{"]) {
      for (const c of format.parse(format.write(CALLS[0]).replace(/\{[\s\S]*\}/, junk)).calls) {
        if (c.ok) assert.notDeepEqual(c.arguments, {}, `junk ${junk} must not become {}`);
      }
    }
  });

  test(`${name}: results become messages carrying their text, in call order`, () => {
    const results = [
      { name: "search", text: "X is a river." },
      { name: null, text: "Error: could not parse tool call" },
      { name: "calc", text: "84" },
    ];
    const messages = format.resultMessages(results);
    assert.ok(
      messages.length > 0 && messages.every((m) => typeof m.role === "string" && typeof m.content === "string"),
    );
    const all = messages.map((m) => m.content).join("\n");
    let at = -1;
    for (const r of results) {
      const found = all.indexOf(r.text, at + 1);
      assert.ok(found > at, `result ${JSON.stringify(r.text)} is missing or out of order`);
      at = found;
    }
  });

  test(`${name}: the structured assistant message keeps the calls`, () => {
    const m = format.assistantMessage(format.join(CALLS.map((c) => format.write(c))));
    assert.equal(m.role, "assistant");
    assert.deepEqual(
      m.tool_calls?.map((c) => [c.function.name, c.function.arguments]),
      CALLS.map((c) => [c.name, c.arguments]),
    );
    assert.equal(
      format.assistantMessage("<tool_call>{bad").content,
      "<tool_call>{bad",
      "an unparseable action keeps its text",
    );
  });
}
