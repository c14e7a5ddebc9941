/** The calculator task: the safe calculator, the generator, the expert through the real env, scoring, conformance. */
import { test } from "node:test";
import assert from "node:assert/strict";
import { hermesFormat } from "../src/agent/formats/hermes.js";
import { renderMessages, chatSetup } from "../src/agent/chat-setup.js";
import { finalTokens } from "../src/agent/trajectory.js";
import {
  calculatorTool,
  createCalcTask,
  evaluateArithmetic,
  formatNumber,
  CALC_TEMPLATE_IDS,
} from "../src/tasks/calc/index.js";
import { InputError } from "../src/util/errors.js";
import { envConformance, toolConformance, chatmlTokenizer } from "../src/testing/index.js";
import { playDemo, replayRollout } from "./task-helpers.js";

const task = createCalcTask({ train: 140, val: 35, test: 35 });

test("calculator: precedence, associativity, unary minus, division, decimals", () => {
  const cases: [string, number][] = [
    ["1 + 2 * 3", 1 + 2 * 3],
    ["(1 + 2) * 3", (1 + 2) * 3],
    ["8 - 3 - 2", 8 - 3 - 2],
    ["8 / 4 / 2", 8 / 4 / 2],
    ["2 * 3 / 4", (2 * 3) / 4],
    ["-2 * 3", -6],
    ["2 * -3", -6],
    ["2 - -3", 5],
    ["--5", 5],
    ["-(2 + 3) * 2", -10],
    ["+4", 4],
    ["1.5 / 3", 0.5],
    [".5 + 1", 1.5],
    ["7 / 2", 3.5],
    [" ( ( 1 ) ) ", 1],
  ];
  for (const [e, want] of cases) assert.equal(evaluateArithmetic(e), want, e);
});

test("calculator: refuses anything that is not arithmetic, with the character and position", () => {
  const refused: [string, RegExp][] = [
    ["process.exit()", /unexpected "p" at position 0: only numbers/],
    ["constructor", /unexpected "c" at position 0/],
    ["__proto__", /unexpected "_" at position 0/],
    ["1; 2", /unexpected ";" at position 1/],
    ["Math.pow(2, 10)", /unexpected "M"/],
    ["1e308 * 10", /unexpected "e" at position 1/],
    ["2 ** 3", /expected a number or '\(' at position 3/],
    ["2 ^ 3", /unexpected "\^"/],
    ["1,000", /unexpected ","/],
    ["(1 + 2", /expected '\)' at the end/],
    ["1 + 2)", /unexpected '\)' at position 5/],
    ["2 3", /unexpected number at position 2/],
    ["", /empty/],
    ["1 / 0", /division by zero/],
    ["1 / (2 - 2)", /division by zero/],
    ["9".repeat(16), /more than 15 digits/],
    [`${"(".repeat(21)}1${")".repeat(21)}`, /deeper than 20 levels/],
    [`${"-".repeat(30)}1`, /deeper than 20 levels/],
    [`1${"+1".repeat(100)}`, /201 characters; the limit is 200/],
  ];
  for (const [e, msg] of refused)
    assert.throws(
      () => evaluateArithmetic(e),
      (err: unknown) => err instanceof InputError && msg.test(err.message),
      e,
    );
  assert.equal(evaluateArithmetic(`${"(".repeat(20)}1${")".repeat(20)}`), 1, "20 levels are allowed");
});

test("calculator: results are written without float noise", () => {
  assert.deepEqual([0.1 + 0.2, 1 / 3, 59, -0, 2.5, 1e15].map(formatNumber), [
    "0.3",
    "0.333333333333",
    "59",
    "0",
    "2.5",
    "1000000000000000",
  ]);
});

test("calculator tool: errors reach the model as text through the env", async () => {
  const env = task.makeEnv(task.rows("val")[0]);
  env.reset(task.rows("val")[0]);
  const r = await env.step({
    text: `<think>x</think>${hermesFormat.write({ name: "calculator", arguments: { expression: "process.exit()" } })}`,
    tokens: [1],
    logprobs: [-1],
    stopReason: "stop",
    turn: 0,
  });
  assert.match(
    (r.observation as { messages: { content: string }[] }).messages[0].content,
    /^Error: tool 'calculator' failed: unexpected "p" at position 0/,
  );
  assert.equal(r.done, false);
});

test("generator: deterministic for a seed, sizes as asked, every template used, no question in two splits", () => {
  const again = createCalcTask({ train: 140, val: 35, test: 35 });
  for (const split of ["train", "val", "test"] as const) assert.deepEqual(again.rows(split), task.rows(split));
  assert.notDeepEqual(createCalcTask({ seed: 1, train: 140, val: 35, test: 35 }).rows("test"), task.rows("test"));
  assert.deepEqual(
    ["train", "val", "test"].map((s) => task.rows(s as "train").length),
    [140, 35, 35],
  );
  const templates = new Set(task.rows("train").map((r) => r.extra_info.template));
  assert.deepEqual([...templates].sort(), [...CALC_TEMPLATE_IDS].sort());
  const seen = new Map<string, string>();
  for (const split of ["train", "val", "test"] as const) {
    for (const r of task.rows(split)) {
      assert.equal(
        seen.get(r.prompt[1].content),
        undefined,
        `'${r.prompt[1].content}' is in ${seen.get(r.prompt[1].content)} and ${split}`,
      );
      seen.set(r.prompt[1].content, split);
      const answer = Number(r.reward_model.ground_truth);
      assert.ok(Number.isInteger(answer) && answer > 0, `${r.prompt[1].content} -> ${answer}`);
    }
  }
  // The held-out splits do not depend on the train size.
  assert.deepEqual(createCalcTask({ train: 3, val: 35, test: 35 }).rows("test"), task.rows("test"));
});

test("rows are in Agent-R1's row format", () => {
  const r = task.rows("test")[0];
  assert.deepEqual(Object.keys(r).sort(), [
    "ability",
    "agent_name",
    "data_source",
    "env_kwargs",
    "extra_info",
    "prompt",
    "reward_model",
  ]);
  assert.deepEqual(
    [r.data_source, r.agent_name, r.ability, r.reward_model.style],
    ["synthetic/calc", "agent_env_loop", "math", "rule"],
  );
  assert.deepEqual(
    r.prompt.map((m) => m.role),
    ["system", "user"],
  );
  assert.deepEqual(JSON.parse(r.env_kwargs!), {
    env_type: "tool",
    tools: ["calculator"],
    tool_format: "hermes",
    tools_kwargs: {},
  });
  assert.deepEqual(
    [r.extra_info.split, r.extra_info.index, r.extra_info.question, r.extra_info.answer],
    ["test", 0, r.prompt[1].content, r.reward_model.ground_truth],
  );
});

test("the expert (quality 1) solves every question through the real calculator with reward 1", async () => {
  for (const split of ["train", "val", "test"] as const) {
    const rows = task.rows(split);
    const demos = task.demonstrations(rows, { seed: 0, quality: 1 });
    for (const [i, row] of rows.entries()) {
      const played = await playDemo(task, row, demos[i]);
      assert.deepEqual(
        [played.done, played.reward, played.toolCalls],
        [true, 1, 1],
        `${split} ${i}: ${row.prompt[1].content}`,
      );
    }
  }
});

test("demonstrations: deterministic for a seed; quality mixes in guesses and slips", async () => {
  const rows = task.rows("train");
  assert.deepEqual(
    task.demonstrations(rows, { seed: 3, quality: 0.5 }),
    task.demonstrations(rows, { seed: 3, quality: 0.5 }),
  );
  assert.notDeepEqual(
    task.demonstrations(rows, { seed: 3, quality: 0.5 }),
    task.demonstrations(rows, { seed: 4, quality: 0.5 }),
  );
  const rewards = async (quality: number) => {
    const demos = task.demonstrations(rows, { seed: 0, quality });
    return Promise.all(rows.map(async (r, i) => (await playDemo(task, r, demos[i])).reward));
  };
  const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
  const [r0, r5] = [await rewards(0), await rewards(0.5)];
  assert.ok(mean(r0) < 0.2, `quality 0: mean reward ${mean(r0)}`);
  const perfect = r5.filter((r) => r === 1).length / r5.length;
  assert.ok(perfect > 0.35 && perfect < 0.7, `quality 0.5: ${perfect} solved`);
  const guesses = task.demonstrations(rows, { seed: 0, quality: 0 }).filter((d) => d.length === 3).length;
  assert.ok(guesses > 40 && guesses < 100, `${guesses} of 140 guesses without the calculator`);
  assert.throws(() => task.demonstrations(rows, { seed: 0, quality: 1.5 }), /quality must be in \[0, 1\]/);
  assert.throws(
    () =>
      task.demonstrations([{ ...rows[0], extra_info: { ...rows[0].extra_info, index: 9999 } }], {
        seed: 0,
        quality: 1,
      }),
    /not one of this task's generated rows/,
  );
});

test("score: a replayed expert scores 1; a wrong or malformed answer is scored by the table", async () => {
  const rows = task.rows("val").slice(0, 3);
  const demos = task.demonstrations(rows, { seed: 0, quality: 1 });
  const res = await replayRollout(task, rows, demos);
  const tok = chatmlTokenizer();
  assert.equal(res.metrics.driftMismatches, 0, "demonstrations are in the form the template re-renders");
  for (const [i, t] of res.trajectories.entries()) {
    assert.deepEqual(task.score(t, rows[i], tok), { reward: 1, em: 1, f1: 1, formatOk: 1 });
    // The demonstration renders to exactly the tokens the rollout holds.
    const rendered = renderMessages(chatSetup(tok), demos[i], {
      tools: task.makeEnv(rows[i]).tools,
      addGenerationPrompt: false,
    });
    assert.equal(`${tok.decode(finalTokens(t))}\n`, rendered);
  }
  const gold = rows[0].reward_model.ground_truth;
  const wrong = demos[0].map((m, k) =>
    k === demos[0].length - 1 ? { ...m, content: `<think>x</think>\n<answer>${Number(gold) + 1}</answer>` } : m,
  );
  const bare = demos[0].map((m, k) =>
    k === demos[0].length - 1 ? { ...m, content: `<answer>${gold}.0</answer>` } : m,
  );
  const [w] = (await replayRollout(task, [rows[0]], [wrong])).trajectories;
  const [b] = (await replayRollout(task, [rows[0]], [bare])).trajectories;
  assert.deepEqual(task.score(w, rows[0], tok), { reward: 0.1, em: 0, f1: 0, formatOk: 1 });
  assert.deepEqual(task.score(b, rows[0], tok), { reward: 0.75, em: 1, f1: 1, formatOk: 0 });
  const cut = (await replayRollout(task, [rows[0]], [demos[0]], 1)).trajectories[0];
  assert.equal(cut.endReason, "max_turns");
  assert.deepEqual(task.score(cut, rows[0], tok), { reward: 0, em: 0, f1: 0, formatOk: 0 });
});

test("corpus holds the prompt, the tool schema, questions and expert turns", () => {
  const text = [...task.corpus()].join("\n");
  for (const needle of [
    task.rows("train")[0].prompt[0].content,
    '"name": "calculator"',
    task.rows("test")[0].prompt[1].content,
    "<tool_call>",
    "<answer>",
  ])
    assert.ok(text.includes(needle), needle);
});

toolConformance(calculatorTool, {
  valid: [{ expression: "12 * (3 + 4)" }, { expression: "-1.5 / 3" }],
  invalid: [
    { expression: 12 },
    {},
    { expression: "" },
    { expression: "1".repeat(201) },
    { expression: "1", extra: true },
  ],
});

envConformance("calc task env", (row) => task.makeEnv(row), {
  rows: task.rows("val").slice(0, 2),
  actions: [
    `<think>x</think>\n${hermesFormat.write({ name: "calculator", arguments: { expression: "2 * 3" } })}`,
    hermesFormat.write({ name: "calculator", arguments: { expression: "import os" } }),
    "<think>done</think>\n<answer>6</answer>",
  ],
});
