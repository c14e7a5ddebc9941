import assert from "node:assert/strict";
import { test } from "node:test";
import { createMultihopTask } from "../src/tasks/multihop/index.js";
import {
  DEFAULT_TYPE_MIX,
  QUESTION_KINDS,
  QUESTION_TYPES,
  kindOf,
  typeSchedule,
  type QuestionType,
} from "../src/tasks/multihop/type-mix.js";

const count = (xs: readonly string[], t: string) => xs.filter((x) => x === t).length;

test("type schedule: n entries, counts by largest remainder, kinds in the mix's proportions", () => {
  const s = typeSchedule(64, DEFAULT_TYPE_MIX);
  assert.equal(s.length, 64);
  // 64 * 0.7 / 3 = 14.93 per bridge type, 64 * 0.15 / 3 = 3.2 per other type: 3 x 14 + 6 x 3 = 60, four more by remainder (the three bridge types, then the first comparison type).
  assert.deepEqual(
    QUESTION_TYPES.map((t) => count(s, t)),
    [15, 15, 15, 4, 3, 3, 3, 3, 3],
  );
  const even = typeSchedule(18, { bridge: 1, comparison: 1, numeric: 1 });
  assert.deepEqual(
    QUESTION_TYPES.map((t) => count(even, t)),
    new Array(9).fill(2),
  );
  const onlyBridge = typeSchedule(10, { bridge: 2, comparison: 0, numeric: 0 });
  assert.ok(onlyBridge.every((t) => kindOf(t) === "bridge"));
});

test("type schedule: each type spread over the sequence, deterministic", () => {
  const s = typeSchedule(90, { bridge: 1, comparison: 1, numeric: 1 });
  assert.deepEqual(s.slice(0, 9), [...QUESTION_TYPES]); // ten of each: every type once in each tenth
  assert.deepEqual(typeSchedule(90, { bridge: 1, comparison: 1, numeric: 1 }), s);
  const firstHalf = typeSchedule(100, DEFAULT_TYPE_MIX).slice(0, 50);
  for (const kind of Object.keys(QUESTION_KINDS) as (keyof typeof QUESTION_KINDS)[]) {
    const n = firstHalf.filter((t) => kindOf(t) === kind).length;
    assert.ok(Math.abs(n - 50 * DEFAULT_TYPE_MIX[kind]) <= 2, `${kind}: ${n} of the first 50`);
  }
  assert.throws(() => typeSchedule(5, { bridge: 0, comparison: 0, numeric: 0 }), /at least one/);
});

test("multihop task options: the mix is a task option, checked at the edge", () => {
  const t = createMultihopTask({ train: 36, val: 9, test: 9, bridge: 0, comparison: 1, numeric: 0 });
  assert.ok(t.questions.train.every((q) => kindOf(q.type as QuestionType) === "comparison"));
  assert.throws(
    () => createMultihopTask({ bridge: 0, comparison: 0, numeric: 0 }),
    /option 'bridge': at least one of bridge, comparison, numeric must be positive/,
  );
  assert.throws(() => createMultihopTask({ numeric: -1 }), /option 'numeric'/);
});
