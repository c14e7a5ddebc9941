/** Demonstration worlds of the warm start: the task generated from other seeds, sharing the questions. */
import { test } from "node:test";
import assert from "node:assert/strict";
import { trainWorlds, WORLD_SEED_OFFSET } from "../src/tasks/worlds.js";
import type { MultihopTask } from "../src/tasks/multihop/task.js";
import { createMultihopTask } from "../src/tasks/multihop/index.js";
import { taskTokenizerCorpus } from "../src/train/task-tokenizer.js";

test("demonstration worlds: one task per seed from seed + offset, the questions shared out, no held-out questions", () => {
  const tasks = trainWorlds("multihop", { seed: 5, topK: 3 }, 4, 30) as MultihopTask[];
  assert.deepEqual(
    tasks.map((t) => t.options.seed),
    [0, 1, 2, 3].map((k) => 5 + WORLD_SEED_OFFSET + k),
  );
  for (const t of tasks) {
    assert.equal(t.rows("train").length, 8); // ceil(30 / 4)
    assert.equal(t.rows("val").length + t.rows("test").length, 0);
    assert.equal(t.options.topK, 3, "other options carry over");
  }
  // Each world draws its own names, so the worlds' questions differ.
  const questions = new Set(tasks.flatMap((t) => t.rows("train").map((r) => r.prompt[1].content)));
  assert.equal(questions.size, 32);
  // Deterministic for the same arguments.
  const again = trainWorlds("multihop", { seed: 5, topK: 3 }, 4, 30);
  assert.deepEqual(
    again.map((t) => t.rows("train")),
    tasks.map((t) => t.rows("train")),
  );
});

test("demonstration worlds: a name of one world stands for other facts in another (names are drawn afresh)", () => {
  const tasks = trainWorlds("multihop", {}, 16, 16 * 64) as MultihopTask[];
  const seen = new Map<string, string>();
  let shared = 0,
    sameText = 0;
  for (const t of tasks) {
    for (const d of t.documents) {
      const other = seen.get(d.id);
      if (other !== undefined) [shared, sameText] = [shared + 1, sameText + (other === d.text ? 1 : 0)];
      seen.set(d.id, d.text);
    }
  }
  assert.ok(shared >= 10, `names shared between worlds: ${shared}`);
  assert.ok(sameText < shared / 10, `${sameText} of ${shared} shared names kept their document`);
  // The default task's held-out world does not come from these seeds.
  const main = createMultihopTask({});
  assert.ok(!tasks.some((t) => t.options.seed === main.options.seed));
});

test("demonstration worlds: a bad count is an error naming it", () => {
  assert.throws(() => trainWorlds("multihop", {}, 0, 10), /need a whole number >= 1, got 0/);
  assert.throws(() => trainWorlds("multihop", {}, 1.5, 10), /got 1.5/);
});

test("the tokenizer corpus of several worlds holds every world's questions and documents", () => {
  const tasks = trainWorlds("multihop", {}, 3, 6) as MultihopTask[];
  const text = [...taskTokenizerCorpus(tasks)].join("\n");
  for (const t of tasks) {
    for (const r of t.rows("train")) assert.ok(text.includes(r.prompt[1].content), r.prompt[1].content);
    assert.ok(text.includes(t.documents[0].text));
  }
});
