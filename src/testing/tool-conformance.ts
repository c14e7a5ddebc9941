/**
 * The Tool conformance suite: every Tool runs it, from a node:test file.
 *   toolConformance(calculator, { valid: [{ expression: "1+1" }], invalid: [{ expression: 3 }] })
 * It checks the definition (name, description, an object JSON Schema), that
 * valid arguments run to a well-formed result within the tool's timeout and
 * response cap, and that invalid arguments are refused before `execute`.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { toolSchema, type AnyTool } from "../agent/tool.js";
import { runToolCall } from "../agent/tool-runner.js";

export interface ToolConformanceOptions {
  /** Arguments the tool must accept. */
  valid: Record<string, unknown>[];
  /** Arguments its schema must refuse. */
  invalid: Record<string, unknown>[];
  /** Passed as the env row (tools that read ground truth from it). */
  row?: unknown;
}

const ctx = (row: unknown, callIndex: number) => ({ row, groundTruth: undefined, callIndex, turn: 0, usage: "" });
const call = (tool: AnyTool, args: Record<string, unknown>) => ({
  ok: true as const,
  name: tool.name,
  arguments: args,
  raw: "",
});

export function toolConformance(tool: AnyTool, opts: ToolConformanceOptions): void {
  const name = `tool '${tool.name}' [tool conformance]`;

  test(`${name}: definition`, () => {
    assert.match(tool.name, /^[A-Za-z_][A-Za-z0-9_.-]{0,63}$/);
    assert.ok(tool.description.trim().length > 0, "description must say what the tool does");
    assert.ok(tool.timeoutMs > 0 && Number.isFinite(tool.timeoutMs));
    assert.ok(Number.isInteger(tool.maxResponseChars) && tool.maxResponseChars > 0);
    const s = toolSchema(tool);
    assert.equal(s.function.name, tool.name);
    assert.equal((s.function.parameters as { type: string }).type, "object");
    assert.ok(!("$schema" in s.function.parameters), "the schema shown to the model carries no $schema");
    assert.deepEqual(JSON.parse(JSON.stringify(s)), s);
  });

  test(`${name}: valid arguments run to a well-formed result`, async () => {
    assert.ok(opts.valid.length > 0, "give at least one valid argument object");
    const tools = new Map([[tool.name, tool]]);
    for (const [i, args] of opts.valid.entries()) {
      const r = await runToolCall(call(tool, args), tools, ctx(opts.row, i));
      assert.equal(r.error?.message, undefined, `args ${JSON.stringify(args)}`);
      assert.ok(r.ok);
      assert.equal(typeof r.text, "string");
      assert.ok(r.text.length <= tool.maxResponseChars + 64, "the response respects maxResponseChars");
      if (r.reward !== undefined) assert.ok(Number.isFinite(r.reward));
      assert.ok(r.durationMs < tool.timeoutMs);
      assert.deepEqual(JSON.parse(JSON.stringify(r)), r);
    }
  });

  test(`${name}: invalid arguments are refused before execute`, async () => {
    assert.ok(opts.invalid.length > 0, "give at least one invalid argument object");
    let executed = 0;
    const spy: AnyTool = { ...tool, execute: async (a, c) => (executed++, tool.execute(a, c)) };
    for (const args of opts.invalid) {
      const r = await runToolCall(call(spy, args), new Map([[tool.name, spy]]), ctx(opts.row, 0));
      assert.equal(r.error?.kind, "invalid_arguments", `args ${JSON.stringify(args)} should fail the schema`);
      assert.match(r.text, new RegExp(`^Error: invalid arguments for tool '${tool.name}'`));
    }
    assert.equal(executed, 0);
  });
}
