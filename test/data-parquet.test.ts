/** TaskRows as Agent-R1 parquet: exact round trips, the column layout, files written elsewhere, bad rows. */
import { test } from "node:test";
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { parquetMetadataAsync, parquetSchema, asyncBufferFromFile } from "hyparquet";
import { parquetWriteBuffer } from "hyparquet-writer";
import { readTaskRowsParquet, writeTaskRowsParquet } from "../src/data/parquet.js";
import { createCalcTask } from "../src/tasks/calc/index.js";
import { createMultihopTask } from "../src/tasks/multihop/index.js";
import type { TaskRow } from "../src/tasks/types.js";
import { InputError } from "../src/util/errors.js";
import { tempDir } from "./helpers.js";

const dir = tempDir("agent-r1-parquet-");
const inputError = (re: RegExp) => (e: unknown) => e instanceof InputError && re.test(e.message);

function oddRows(): TaskRow[] {
  const rows = [
    ...createMultihopTask({ train: 10, val: 0, test: 0 }).rows("train"),
    ...createCalcTask({ train: 0, val: 5, test: 0 }).rows("val"),
  ];
  Object.assign(rows[0].extra_info, {
    nested: { list: [1, null, "x"], deep: { ok: true } },
    nul: null,
    big: 2 ** 40,
    "dotted.key": "v",
  });
  Object.assign(rows[1].extra_info, { ratio: 1.5, flag: false, big: 3 });
  Object.assign(rows[2].extra_info, { ratio: 2, mixed: "a" });
  Object.assign(rows[3].extra_info, { mixed: 4 });
  delete rows[4].ability;
  delete rows[5].env_kwargs;
  rows[6].prompt = [{ role: "user", content: 'only a user message, with "quotes" and ünïcode' }];
  return rows;
}

test("round trip: rows of both tasks, optional fields absent, extra_info of every kind", async () => {
  const rows = oddRows();
  const path = join(dir, "nested", "rows.parquet");
  writeTaskRowsParquet(path, rows);
  assert.deepEqual(await readTaskRowsParquet(path), { rows, skipped: 0 });
  writeTaskRowsParquet(join(dir, "empty.parquet"), []);
  assert.deepEqual(await readTaskRowsParquet(join(dir, "empty.parquet")), { rows: [], skipped: 0 });
});

test("layout: nested columns as pyarrow writes Agent-R1 rows; JSON-encoded extra_info fields listed in the metadata", async () => {
  const path = join(dir, "layout.parquet");
  writeTaskRowsParquet(path, oddRows());
  const meta = await parquetMetadataAsync(await asyncBufferFromFile(path));
  const top = parquetSchema(meta).children.map((c) => c.element.name);
  assert.deepEqual(top, ["data_source", "agent_name", "prompt", "ability", "reward_model", "extra_info", "env_kwargs"]);
  const names = meta.schema.map((e) => `${e.name}:${e.type ?? "group"}`);
  assert.deepEqual(names.slice(3, 8), [
    "prompt:group",
    "list:group",
    "element:group",
    "role:BYTE_ARRAY",
    "content:BYTE_ARRAY",
  ]);
  const extra = Object.fromEntries(
    meta.schema.slice(meta.schema.findIndex((e) => e.name === "extra_info") + 1, -1).map((e) => [e.name, e.type]),
  );
  assert.equal(extra.index, "INT64");
  assert.equal(extra.big, "INT64");
  assert.equal(extra.ratio, "DOUBLE");
  assert.equal(extra.flag, "BOOLEAN");
  assert.equal(extra.question, "BYTE_ARRAY");
  const listed = JSON.parse(meta.key_value_metadata!.find((kv) => kv.key === "agent_r1.json_fields")!.value!);
  assert.deepEqual(listed.sort(), ["extra_info.mixed", "extra_info.nested", "extra_info.nul"]);
});

test("writing refuses what parquet rows cannot hold, naming the row", () => {
  const rows = oddRows();
  rows[1].prompt = [{ role: "assistant", content: "", tool_calls: [{ function: { name: "search", arguments: {} } }] }];
  assert.throws(
    () => writeTaskRowsParquet(join(dir, "x.parquet"), rows),
    inputError(/x\.parquet: row 2: prompt\[0\] has 'tool_calls'/),
  );
  const nan = oddRows();
  nan[2].extra_info.score = NaN;
  assert.throws(() => writeTaskRowsParquet(join(dir, "x.parquet"), nan), inputError(/row 3: extra_info\.score is NaN/));
  const bad = oddRows();
  (bad[0].reward_model as { ground_truth: unknown }).ground_truth = 5;
  assert.throws(
    () => writeTaskRowsParquet(join(dir, "x.parquet"), bad),
    inputError(/x\.parquet: row 1: reward_model\.ground_truth/),
  );
});

/** A file as pandas/pyarrow would write it: struct fields filled with null, int64 everywhere, one row broken. */
function foreignFile(path: string): void {
  const str = (name: string) => ({
    name,
    type: "BYTE_ARRAY" as const,
    converted_type: "UTF8" as const,
    repetition_type: "OPTIONAL" as const,
  });
  const schema = [
    { name: "root", num_children: 5 },
    str("data_source"),
    str("agent_name"),
    { name: "prompt", repetition_type: "OPTIONAL" as const, converted_type: "LIST" as const, num_children: 1 },
    { name: "list", repetition_type: "REPEATED" as const, num_children: 1 },
    { name: "element", repetition_type: "OPTIONAL" as const, num_children: 2 },
    str("content"),
    str("role"),
    { name: "reward_model", repetition_type: "OPTIONAL" as const, num_children: 2 },
    str("ground_truth"),
    str("style"),
    { name: "extra_info", repetition_type: "OPTIONAL" as const, num_children: 3 },
    { name: "index", type: "INT64" as const, repetition_type: "OPTIONAL" as const },
    str("split"),
    str("question"),
  ];
  const prompt = [
    { content: "Be brief.", role: "system" },
    { content: "What is 6 * 7?", role: "user" },
  ];
  const columnData = [
    { name: "data_source", data: ["openai/gsm8k", "openai/gsm8k", "openai/gsm8k"] },
    { name: "agent_name", data: ["agent_env_loop", "agent_env_loop", "agent_env_loop"] },
    { name: "prompt", data: [prompt, prompt, prompt] },
    {
      name: "reward_model",
      data: [
        { ground_truth: "42", style: "rule" },
        { ground_truth: null, style: "rule" },
        { ground_truth: "7", style: "rule" },
      ],
    },
    {
      name: "extra_info",
      data: [
        { index: 0n, split: "train", question: null },
        { index: 1n, split: "train", question: "q" },
        { index: 2n, split: "train", question: "q2" },
      ],
    },
  ];
  writeFileSync(path, new Uint8Array(parquetWriteBuffer({ columnData, schema, statistics: false })));
}

test("files written elsewhere: null struct fields are absent, int64 become numbers, bad rows name the row", async () => {
  const path = join(dir, "foreign.parquet");
  foreignFile(path);
  const expected = (index: number, truth: string, question?: string): TaskRow => ({
    data_source: "openai/gsm8k",
    agent_name: "agent_env_loop",
    prompt: [
      { role: "system", content: "Be brief." },
      { role: "user", content: "What is 6 * 7?" },
    ],
    reward_model: { style: "rule", ground_truth: truth },
    extra_info: { index, split: "train", ...(question ? { question } : {}) },
  });
  await assert.rejects(
    readTaskRowsParquet(path),
    inputError(/foreign\.parquet: row 2: reward_model\.ground_truth: .*expected string/),
  );
  assert.deepEqual(await readTaskRowsParquet(path, { skipBadRows: true }), {
    rows: [expected(0, "42"), expected(2, "7", "q2")],
    skipped: 1,
  });
});

test("reading a file that is not parquet, or is missing, names it", async () => {
  const path = join(dir, "not.parquet");
  writeFileSync(path, "hello");
  await assert.rejects(readTaskRowsParquet(path), inputError(/not\.parquet: cannot read as parquet/));
  await assert.rejects(
    readTaskRowsParquet(join(dir, "missing.parquet")),
    inputError(/missing\.parquet: file not found/),
  );
});
