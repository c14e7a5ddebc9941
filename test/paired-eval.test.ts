/** dev/experiments/paired-eval.ts: two models' episodes on the same rows compared one by one, hand-worked. */
import { test } from "node:test";
import assert from "node:assert/strict";
import { pairedComparison } from "../dev/experiments/paired-eval.js";

const line = (row: number, em: number, sample = 0) => ({ row, sample, em });

test("pairedComparison: exact match of each over shared episodes, the discordant counts and the sign test", () => {
  const a = [line(0, 1), line(1, 1), line(2, 0), line(3, 0), line(4, 1), line(5, 0), line(9, 1)];
  const b = [line(5, 1), line(4, 1), line(3, 1), line(2, 1), line(1, 0), line(0, 1), line(0, 1, 1)];
  // Shared: rows 0-5 (row 9 and row 0's second sample are in one file only).
  // A right: 0, 1, 4; B right: 0, 2, 3, 4, 5; only A: 1; only B: 2, 3, 5.
  assert.deepEqual(pairedComparison(a, b), { n: 6, emA: 3 / 6, emB: 5 / 6, onlyA: 1, onlyB: 3, z: 2 / 2 });
  assert.deepEqual(pairedComparison(a, a), { n: 7, emA: 4 / 7, emB: 4 / 7, onlyA: 0, onlyB: 0, z: 0 });
  assert.deepEqual(pairedComparison([], b), { n: 0, emA: 0, emB: 0, onlyA: 0, onlyB: 0, z: 0 });
});
