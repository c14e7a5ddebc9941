/** The format component and the outcome reward table (src/rewards/format.ts). */
import { test } from "node:test";
import assert from "node:assert/strict";
import { extractAnswer, formatScore, isAnswerTurn, isToolTurn, rewardWithFormat } from "../src/rewards/format.js";

const call = (q: string) => `<tool_call>\n{"name": "search", "arguments": {"query": "${q}"}}\n</tool_call>`;
const TOOL = `<think>Find Kalomi.</think>\n${call("Kalomi")}`;
const ANSWER = "<think>It is Lusk.</think>\n<answer>Lusk</answer>";

test("isToolTurn: think, then one or more well-formed calls, nothing else", () => {
  assert.ok(isToolTurn(TOOL));
  assert.ok(isToolTurn(`  <think></think>${call("a")}\n${call("b")}\n`));
  assert.ok(!isToolTurn(call("a")), "no think");
  assert.ok(!isToolTurn(`${call("a")}<think>x</think>`), "think after the call");
  assert.ok(!isToolTurn(`Sure! ${TOOL}`), "text outside the blocks");
  assert.ok(!isToolTurn(`${TOOL} done`), "text after the call");
  assert.ok(!isToolTurn("<think>x</think><tool_call>{bad json}</tool_call>"));
  assert.ok(!isToolTurn('<think>x</think><tool_call>{"name": "search"}</tool_call>'), "no arguments");
  assert.ok(!isToolTurn(`<think><answer>x</answer></think>${call("a")}`), "tags inside think");
  assert.ok(!isToolTurn(`<think>x</think>${call("a")}<answer>y</answer>`));
});

test("isAnswerTurn: think, then one non-empty answer, nothing else", () => {
  assert.ok(isAnswerTurn(ANSWER));
  assert.ok(isAnswerTurn("<think>3 < 5</think><answer>5</answer>\n"), "a bare < in text is fine");
  assert.ok(!isAnswerTurn("<answer>Lusk</answer>"), "no think");
  assert.ok(!isAnswerTurn("<think>x</think><answer>  </answer>"), "empty answer");
  assert.ok(!isAnswerTurn("<think>x</think><answer>a</answer><answer>b</answer>"));
  assert.ok(!isAnswerTurn(`<think>x</think><answer>a</answer>${call("q")}`));
  assert.ok(!isAnswerTurn("<think>x</think>The answer is <answer>Lusk</answer>"));
});

test("extractAnswer: the first <answer> block, as ToolEnv reads it", () => {
  assert.equal(extractAnswer(ANSWER), "Lusk");
  assert.equal(extractAnswer("<answer>a</answer><answer>b</answer>"), "a");
  assert.equal(extractAnswer("<answer>\nmulti\nline</answer>"), "\nmulti\nline");
  assert.equal(extractAnswer("no answer"), undefined);
});

test("formatScore: 0.5 for well-formed tool turns, 0.5 for a well-formed answer turn", () => {
  assert.equal(formatScore([TOOL, TOOL, ANSWER]), 1);
  assert.equal(formatScore([ANSWER]), 1); // no tool turns: that half holds
  assert.equal(formatScore([call("x"), ANSWER]), 0.5);
  assert.equal(formatScore([TOOL, "<answer>Lusk</answer>"]), 0.5);
  assert.equal(formatScore([call("x"), "Lusk"]), 0);
  assert.equal(formatScore([]), 0);
});

test("rewardWithFormat: correct and well-formed is the only 1; any correct answer beats any wrong one", () => {
  const table = [
    [1, 1, 1],
    [1, 0.5, 0.75],
    [1, 0, 0.5],
    [0, 1, 0.1],
    [0, 0.5, 0.05],
    [0, 0, 0],
  ];
  for (const [correct, format, want] of table)
    assert.equal(rewardWithFormat(correct, format), want, `correct ${correct}, format ${format}`);
  const wrongBest = Math.max(...[0, 0.5, 1].map((f) => rewardWithFormat(0, f)));
  const correctWorst = Math.min(...[0, 0.5, 1].map((f) => rewardWithFormat(1, f)));
  assert.ok(wrongBest < correctWorst);
});
