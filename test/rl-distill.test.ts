/** On-policy distillation's per-token advantage (src/rl/distill.ts), worked by hand. */
import { test } from "node:test";
import assert from "node:assert/strict";
import { addAdvantages, distillAdvantages, TEACHER_LOGPROB_FLOOR } from "../src/rl/distill.js";
import { InputError } from "../src/util/errors.js";

const close = (a: number, b: number, what: string) => assert.ok(Math.abs(a - b) < 1e-12, `${what}: ${a} vs ${b}`);
const closeRows = (got: number[][], want: number[][], what: string) =>
  want.forEach((row, d) => row.forEach((x, i) => close(got[d][i], x, `${what}[${d}][${i}]`)));

test("one datum: −coef·(s − q) on action tokens, 0 on prompt and observation targets", () => {
  // Positions: 0 prompt target, 1–2 action, 3 observation target, 4 action.
  const mask = [[0, 1, 1, 0, 1]];
  const student = [[0, -0.5, -2.0, 0, -1.0]];
  // The teacher scores every position; the prompt and observation ones (−9, −7) must be ignored.
  const teacher = [[-9, -0.25, -3.0, -7, -1.0]];
  const { advantages, metrics } = distillAdvantages({ student, teacher, mask }, 2);
  // d = s − q: position 1: −0.5 − (−0.25) = −0.25 → A = −2·(−0.25) = +0.5 (the teacher likes the token more)
  //            position 2: −2 − (−3) = +1 → A = −2 (the teacher likes it less)
  //            position 4: −1 − (−1) = 0 → A = 0
  closeRows(advantages, [[0, 0.5, -2, 0, 0]], "advantages");
  // Over the 3 action tokens: mean q = (−0.25 − 3 − 1)/3 = −4.25/3; mean d = (−0.25 + 1 + 0)/3 = 0.25.
  close(metrics.teacherLogprob, -4.25 / 3, "teacher logprob");
  close(metrics.reverseKl, 0.25, "reverse KL");
  assert.equal(metrics.tokens, 3);
});

test("several datums of one episode, and of two: every action token counts once, in its own datum", () => {
  // Episode 0 was split by a context rewrite into datums 0 and 1; datum 2 is episode 1.
  const mask = [
    [0, 1, 1],
    [0, 0, 1, 0, 1],
    [0, 1],
  ];
  const student = [
    [0, -1, -1],
    [0, 0, -0.2, 0, -0.4],
    [0, -3],
  ];
  const teacher = [
    [-5, -0.5, -2],
    [-5, -5, -0.2, -5, -0.1],
    [-5, -1],
  ];
  const { advantages, metrics } = distillAdvantages({ student, teacher, mask }, 0.5);
  // d per action token: datum 0: −1 + 0.5 = −0.5, −1 + 2 = 1; datum 1: 0, −0.4 + 0.1 = −0.3; datum 2: −3 + 1 = −2.
  // A = −0.5·d: 0.25, −0.5; 0, 0.15; 1.
  closeRows(
    advantages,
    [
      [0, 0.25, -0.5],
      [0, 0, 0, 0, 0.15],
      [0, 1],
    ],
    "advantages",
  );
  // 5 action tokens: Σq = −0.5 − 2 − 0.2 − 0.1 − 1 = −3.8; Σd = −0.5 + 1 + 0 − 0.3 − 2 = −1.8.
  close(metrics.teacherLogprob, -3.8 / 5, "teacher logprob");
  close(metrics.reverseKl, -1.8 / 5, "reverse KL");
  assert.equal(metrics.tokens, 5);
});

test("a teacher that calls a token impossible is held at the floor; no action token gives zeros", () => {
  const { advantages, metrics } = distillAdvantages(
    { student: [[-1, -2]], teacher: [[-Infinity, -0.5]], mask: [[1, 1]] },
    1,
  );
  // Position 0: q = −30, d = −1 + 30 = 29, A = −29. Position 1: d = −1.5, A = 1.5.
  assert.equal(TEACHER_LOGPROB_FLOOR, -30);
  closeRows(advantages, [[-29, 1.5]], "advantages");
  close(metrics.teacherLogprob, (-30 - 0.5) / 2, "teacher logprob");
  close(metrics.reverseKl, (29 - 1.5) / 2, "reverse KL");
  const none = distillAdvantages({ student: [[-1]], teacher: [[-2]], mask: [[0]] }, 1);
  assert.deepEqual(none, { advantages: [[0]], metrics: { teacherLogprob: 0, reverseKl: 0, tokens: 0 } });
});

test("ragged rows and non-numbers are refused", () => {
  assert.throws(
    () => distillAdvantages({ student: [[-1]], teacher: [[-1, -2]], mask: [[1, 1]] }, 1),
    (e: unknown) => e instanceof InputError && /datum 0: student, teacher and mask/.test((e as Error).message),
  );
  assert.throws(
    () => distillAdvantages({ student: [[NaN]], teacher: [[-1]], mask: [[1]] }, 1),
    (e: unknown) => e instanceof InputError && /position 0: logprobs must be numbers/.test((e as Error).message),
  );
});

test("addAdvantages adds per position, treats missing advantages as 0, and leaves the inputs alone", () => {
  const a = { tokens: [1, 2], targetTokens: [2, 3], weights: [0, 1], advantages: [0, 0.7] };
  const b = { tokens: [4], targetTokens: [5], weights: [1] };
  const out = addAdvantages([a, b], [[0, -0.2], [0.3]]);
  closeRows(
    out.map((d) => d.advantages!),
    [[0, 0.5], [0.3]],
    "advantages",
  );
  assert.deepEqual(a.advantages, [0, 0.7]);
  assert.equal((b as { advantages?: number[] }).advantages, undefined);
  assert.throws(() => addAdvantages([a], [[1]]), /datum 0: 2 positions, but 1 advantages/);
});
