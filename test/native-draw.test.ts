/**
 * The native sampler's untruncated draws (native/kernels/draw_rows.c, drawTokens) against sampling.ts's
 * drawToken given the same uniform: the same token wherever the uniform is not within float32
 * rounding of a boundary of the CDF, the same logprob within float32 rounding; the edges (one
 * token with all the mass, a uniform near 1; a row with no finite logit is an error); bad arguments.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { loadAddon, type Addon } from "../src/engine/local/addon.js";
import { drawToken } from "../src/engine/sampling.js";
import { Rng } from "../src/util/rng.js";
import { native } from "./native-helpers.js";

function addonOrFail(): Addon {
  const st = loadAddon();
  assert.ok(st.ok, `the native addon did not load: ${st.ok ? "" : st.reason}`);
  return st.addon;
}

/** A generator whose next draw is u (drawToken takes exactly one uniform for an untruncated draw). */
const fixed = (u: number) => ({ next: () => u }) as unknown as Rng;

function drawC(addon: Addon, rows: Float32Array[], t: number[], u: number[]) {
  const tokens = new Int32Array(rows.length),
    logprobs = new Float64Array(rows.length);
  addon.drawTokens(rows, Float64Array.from(t), Float64Array.from(u), tokens, logprobs);
  return { tokens, logprobs };
}

test("drawTokens draws what drawToken draws with the same uniform", native, () => {
  const addon = addonOrFail();
  const rng = new Rng(31);
  let compared = 0;
  for (const [vocab, temperature, spread] of [
    [7, 1, 1],
    [1000, 0.7, 3],
    [5000, 1.3, 8],
    [151936, 0.9, 2],
  ] as const) {
    const rows = Array.from({ length: 6 }, () => Float32Array.from({ length: vocab }, () => rng.normal() * spread));
    const u = rows.map(() => rng.next());
    const got = drawC(
      addon,
      rows,
      rows.map(() => temperature),
      u,
    );
    rows.forEach((row, i) => {
      const want = drawToken(row, { temperature, topK: 0, topP: 1 }, fixed(u[i]));
      const tokenNear = (x: number) => drawToken(row, { temperature, topK: 0, topP: 1 }, fixed(x)).token;
      // a uniform within 1e-5 of a CDF boundary may fall on either side with float32 terms
      if (
        tokenNear(Math.max(0, u[i] - 1e-5)) === want.token &&
        tokenNear(Math.min(0.9999999, u[i] + 1e-5)) === want.token
      ) {
        assert.equal(got.tokens[i], want.token, `vocab ${vocab} row ${i}: token`);
        compared++;
      }
      assert.ok(
        Math.abs(got.logprobs[i] - logprobOf(row, temperature, got.tokens[i])) < 1e-5,
        `vocab ${vocab} row ${i}: logprob ${got.logprobs[i]}`,
      );
    });
  }
  assert.ok(compared >= 20, `only ${compared} draws were away from a boundary`);
});

/** log softmax(row / t)[j] in float64. */
function logprobOf(row: Float32Array, t: number, j: number): number {
  let max = -Infinity;
  for (const x of row) max = Math.max(max, x);
  let s = 0;
  for (const x of row) s += Math.exp((x - max) / t);
  return (row[j] - max) / t - Math.log(s);
}

test("drawTokens: one token with all the mass, uniforms at the ends, a row with no finite logit", native, () => {
  const addon = addonOrFail();
  const onlyFive = new Float32Array(3000).fill(-Infinity);
  onlyFive[5] = 2;
  const lastHeavy = new Float32Array(2000).fill(-50);
  lastHeavy[1999] = 10;
  const dead = new Float32Array(10).fill(-Infinity);
  const a = drawC(addon, [onlyFive, onlyFive], [1, 1], [0, 0.9999999]);
  const b = drawC(addon, [lastHeavy, lastHeavy], [1, 1], [0.5, 0.9999999]);
  assert.deepEqual([...a.tokens, ...b.tokens], [5, 5, 1999, 1999]);
  assert.deepEqual([...a.logprobs], [0, 0]);
  // no finite logit: nothing to draw (it used to be token 0 with logprob 0), an error naming the row
  assert.throws(() => drawC(addon, [onlyFive.subarray(0, 10), dead], [1, 1], [0.5, 0.5]), {
    message: /^drawTokens: logits\[1\]: no finite value/,
    row: 1,
  });
  // a small uniform lands on the first token of the tiny ones before the heavy one
  const first = drawC(addon, [lastHeavy], [1], [1e-30]);
  assert.equal(first.tokens[0], 0);
});

test("drawTokens checks its arguments and names the bad one", native, () => {
  const addon = addonOrFail();
  const row = new Float32Array(4);
  const t = Float64Array.of(1),
    u = Float64Array.of(0.5),
    tok = new Int32Array(1),
    lp = new Float64Array(1);
  assert.throws(() => addon.drawTokens([row], Float64Array.of(0), u, tok, lp), {
    name: "RangeError",
    message: /temperatures must be > 0/,
  });
  assert.throws(() => addon.drawTokens([row], t, Float64Array.of(1), tok, lp), {
    name: "RangeError",
    message: /uniforms/,
  });
  assert.throws(
    () =>
      addon.drawTokens(
        [row, new Float32Array(5)],
        Float64Array.of(1, 1),
        Float64Array.of(0, 0),
        new Int32Array(2),
        new Float64Array(2),
      ),
    {
      name: "RangeError",
      message: /logits\[i\] holds 5/,
    },
  );
  assert.throws(() => addon.drawTokens([row], t, u, new Int32Array(2), lp), { name: "RangeError", message: /tokens/ });
  assert.throws(() => addon.drawTokens(row as unknown as Float32Array[], t, u, tok, lp), {
    name: "TypeError",
    message: /logits must be an array/,
  });
});
