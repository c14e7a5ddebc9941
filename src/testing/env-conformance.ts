/**
 * The Env conformance suite: every Env runs it (the project's own in
 * test/agent-conformance.test.ts; yours from a node:test file of your own).
 *   envConformance("ToolEnv (hermes)", (row) => new ToolEnv({...}), { rows, actions })
 * It checks the observation and step-result shapes, that hostile action text
 * never throws, that results are JSON-serializable, and (for deterministic
 * envs) that two instances share no state.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { checkObservation, checkStepResult, type Action, type EnvFactory, type StepResult } from "../agent/env.js";

export interface EnvConformanceOptions<Row> {
  rows: Row[];
  /** Action texts that make the env do its work (tool calls, answers); stepped in order after one reset. */
  actions: string[];
  /** Same actions give the same results (timing fields aside). Default true. */
  deterministic?: boolean;
}

export const HOSTILE_ACTIONS = [
  "",
  "<tool_call>",
  '<tool_call>{"name": </tool_call>',
  "<tool_call>[1, 2]</tool_call><tool_call>null</tool_call>",
  '{"name": 3, "parameters": []}',
  "<answer></answer>",
  "\u0000\ud800 \uffff",
  "x".repeat(20_000),
];

export function actionOf(text: string, turn: number): Action {
  const tokens = Array.from(text.slice(0, 64), (c) => c.charCodeAt(0) % 256);
  return { text, tokens, logprobs: tokens.map(() => -1), stopReason: "stop", turn };
}

/** The result without wall-clock fields, for comparing two runs. */
function timeless(r: StepResult): unknown {
  return JSON.parse(JSON.stringify(r, (k, v) => (k === "startedAt" || k === "durationMs" ? undefined : v)));
}

export function envConformance<Row>(name: string, makeEnv: EnvFactory<Row>, opts: EnvConformanceOptions<Row>): void {
  const deterministic = opts.deterministic ?? true;

  test(`${name} [env conformance]: reset gives exactly one kind of observation, tools are function schemas`, async () => {
    for (const [i, row] of opts.rows.entries()) {
      const env = makeEnv(row, i);
      checkObservation(await env.reset(row), "reset");
      for (const t of env.tools ?? []) {
        assert.equal(t.type, "function");
        assert.match(t.function.name, /^[A-Za-z_][A-Za-z0-9_.-]*$/);
        assert.equal(
          (t.function.parameters as { type?: unknown }).type,
          "object",
          `${t.function.name}: parameters must be an object schema`,
        );
      }
      await env.close?.();
    }
  });

  test(`${name} [env conformance]: steps return well-formed, JSON-serializable results`, async () => {
    for (const [i, row] of opts.rows.entries()) {
      const env = makeEnv(row, i);
      await env.reset(row);
      for (const [turn, text] of opts.actions.entries()) {
        const r = checkStepResult(await env.step(actionOf(text, turn)));
        assert.deepEqual(JSON.parse(JSON.stringify(r)), r, "a step result must survive JSON round trips");
        if (r.done) break;
      }
      await env.close?.();
    }
  });

  test(`${name} [env conformance]: hostile action text never throws`, async () => {
    const row = opts.rows[0];
    for (const text of HOSTILE_ACTIONS) {
      const env = makeEnv(row, 0);
      await env.reset(row);
      checkStepResult(await env.step(actionOf(text, 0)));
      await env.close?.();
    }
  });

  if (deterministic) {
    test(`${name} [env conformance]: instances share no state`, async () => {
      const row = opts.rows[0];
      const a = makeEnv(row, 0),
        b = makeEnv(row, 1);
      await a.reset(row);
      await b.reset(row);
      const first = await a.step(actionOf(opts.actions[0], 0));
      // Stepping `a` further must not change what `b` sees.
      for (const [k, text] of opts.actions.slice(1).entries()) if ((await a.step(actionOf(text, k + 1))).done) break;
      assert.deepEqual(timeless(await b.step(actionOf(opts.actions[0], 0))), timeless(first));
      await a.close?.();
      await b.close?.();
    });
  }
}
