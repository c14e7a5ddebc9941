/** JSONL reading and writing, and TaskRows as JSONL: exact round trips, errors naming the file and line, skipBadRows. */
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { readJsonl, writeJsonl } from "../src/data/jsonl.js";
import { readTaskRowsJsonl, writeTaskRowsJsonl } from "../src/data/task-rows-jsonl.js";
import { createCalcTask } from "../src/tasks/calc/index.js";
import { createMultihopTask } from "../src/tasks/multihop/index.js";
import { InputError } from "../src/util/errors.js";
import { tempDir } from "./helpers.js";

const dir = tempDir("agent-r1-jsonl-");
const inputError = (re: RegExp) => (e: unknown) => e instanceof InputError && re.test(e.message);

test("writeJsonl / readJsonl: one compact value per line, round trip exact", () => {
  const path = join(dir, "sub", "values.jsonl");
  const values = [{ a: 1, b: [true, null, 'é\n"x"'] }, 3.25, "text", [], { nested: { deep: { ok: false } } }];
  writeJsonl(path, values);
  assert.equal(readFileSync(path, "utf8"), `${values.map((v) => JSON.stringify(v)).join("\n")}\n`);
  assert.deepEqual(readJsonl(path), { rows: values, skipped: 0 });
  writeJsonl(join(dir, "empty.jsonl"), []);
  assert.deepEqual(readJsonl(join(dir, "empty.jsonl")), { rows: [], skipped: 0 });
});

test("readJsonl: blank lines and CRLF are fine; a bad line names the file and its line number", () => {
  const path = join(dir, "bad.jsonl");
  writeFileSync(path, '{"a": 1}\r\n\n  \n{"a": 2,}\n{"a": 3}\n');
  assert.throws(
    () => readJsonl(path),
    inputError(new RegExp(`^${path.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}: line 4: invalid JSON: `)),
  );
  assert.deepEqual(readJsonl(path, { skipBadRows: true }), { rows: [{ a: 1 }, { a: 3 }], skipped: 1 });
  assert.throws(() => readJsonl(join(dir, "missing.jsonl")), inputError(/missing\.jsonl: file not found/));
  assert.throws(
    () => writeJsonl(join(dir, "x.jsonl"), [1, undefined]),
    inputError(/x\.jsonl: row 2: undefined cannot be written as JSON/),
  );
  assert.throws(() => writeJsonl(join(dir, "x.jsonl"), [{ n: 1n }]), inputError(/row 1: cannot be written as JSON/));
});

test("TaskRows as JSONL: the round trip is exact for both tasks' rows", () => {
  const rows = [
    ...createMultihopTask({ train: 12, val: 0, test: 0 }).rows("train"),
    ...createCalcTask({ train: 0, val: 0, test: 7 }).rows("test"),
  ];
  rows[0].extra_info.nested = { list: [1, { x: null }], n: -2.5 };
  delete rows[1].ability;
  const path = join(dir, "rows.jsonl");
  writeTaskRowsJsonl(path, rows);
  assert.deepEqual(readTaskRowsJsonl(path), { rows, skipped: 0 });
});

test("TaskRows as JSONL: bad rows name the file, the line and the field; skipBadRows counts them", () => {
  const [good] = createCalcTask({ train: 1, val: 0, test: 0 }).rows("train");
  const noTruth = { ...good, reward_model: { style: "rule" } };
  const badRole = { ...good, prompt: [{ role: "robot", content: "hi" }] };
  const path = join(dir, "badrows.jsonl");
  writeFileSync(path, [good, noTruth, good, badRole].map((r) => JSON.stringify(r)).join("\n"));
  assert.throws(
    () => readTaskRowsJsonl(path),
    inputError(/badrows\.jsonl: line 2: reward_model\.ground_truth: .*expected string/),
  );
  assert.deepEqual(readTaskRowsJsonl(path, { skipBadRows: true }), { rows: [good, good], skipped: 2 });
  assert.throws(
    () => writeTaskRowsJsonl(join(dir, "w.jsonl"), [good, badRole as never]),
    inputError(/w\.jsonl: row 2: prompt\.0\.role/),
  );
});
