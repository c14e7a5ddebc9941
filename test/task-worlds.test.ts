/** task.worlds: training rows drawn from other worlds of a generated task, each played in its own world. */
import { test } from "node:test";
import assert from "node:assert/strict";
import { hermesFormat } from "../src/agent/formats/hermes.js";
import { loadTask, type TaskRow } from "../src/tasks/index.js";
import { createMultihopTask, type MultihopTask } from "../src/tasks/multihop/task.js";
import { searchText } from "../src/tasks/multihop/search.js";
import { rowWorld, trainWorlds, withTrainWorlds, WORLD_SEED_OFFSET } from "../src/tasks/worlds.js";
import { loadConfig, parseConfig } from "../src/train/load-config.js";
import { actionOf } from "../src/testing/index.js";
import { InputError } from "../src/util/errors.js";

const OPTIONS = { seed: 3, train: 12, val: 5, test: 4 };

test("task.worlds: train rows come from the worlds in turn, tagged; val and test stay the task's own", async () => {
  const task = await loadTask({ name: "multihop", options: OPTIONS, worlds: 3, firstWorld: 2 });
  const own = createMultihopTask(OPTIONS);
  const worlds = trainWorlds("multihop", OPTIONS, 3, 12, 2) as MultihopTask[];
  assert.deepEqual(
    worlds.map((w) => w.options.seed),
    [0, 1, 2].map((k) => 3 + WORLD_SEED_OFFSET + 2 + k),
  );
  const train = task.rows("train");
  assert.equal(train.length, 12); // ceil(12 / 3) = 4 from each world
  assert.deepEqual(train.map(rowWorld), [0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2]);
  // The i-th row of world k is that world's i-th train row, with its world noted.
  assert.deepEqual(train[4], {
    ...worlds[1].rows("train")[1],
    extra_info: { ...worlds[1].rows("train")[1].extra_info, world: 1 },
  });
  const ownQuestions = new Set(own.rows("train").map((r) => r.prompt[1].content));
  assert.ok(!train.some((r) => ownQuestions.has(r.prompt[1].content)), "no train question of the task's own world");
  for (const split of ["val", "test"] as const) {
    assert.deepEqual(task.rows(split), own.rows(split));
    assert.ok(task.rows(split).every((r) => rowWorld(r) === undefined));
  }
  assert.deepEqual([...task.corpus()], [...own.corpus()]);
});

test("task.worlds: a world's row searches that world's documents and is demonstrated from it", async () => {
  const own = createMultihopTask(OPTIONS);
  const worlds = trainWorlds("multihop", OPTIONS, 2, 4) as MultihopTask[];
  const task = withTrainWorlds(own, worlds);
  const row = task.rows("train").find((r) => rowWorld(r) === 1)!;
  const query = row.prompt[1].content;
  const env = task.makeEnv(row);
  await env.reset(row);
  const r = await env.step(
    actionOf(`<think>look</think>\n${hermesFormat.write({ name: "search", arguments: { query } })}`, 0),
  );
  const seen = (r.observation as { messages: { content: string }[] }).messages[0].content;
  assert.equal(seen, searchText(worlds[1].index, query, own.options.topK));
  assert.notEqual(seen, searchText(worlds[0].index, query, own.options.topK), "the worlds' documents differ");
  // Answering with the gold answer scores 1 in its world.
  const done = await env.step(actionOf(`<answer>${row.reward_model.ground_truth}</answer>`, 1));
  assert.deepEqual([done.done, done.reward > 0], [true, true]);
  assert.deepEqual(
    task.demonstrations([row], { seed: 4, quality: 1 }),
    worlds[1].demonstrations([row], { seed: 4, quality: 1 }),
  );
});

test("task.worlds: bad input is refused in one line", async () => {
  const own = createMultihopTask(OPTIONS);
  const task = withTrainWorlds(own, trainWorlds("multihop", OPTIONS, 2, 4));
  const stray: TaskRow = { ...own.rows("val")[0], extra_info: { ...own.rows("val")[0].extra_info, world: 7 } };
  assert.throws(
    () => task.makeEnv(stray),
    (e: unknown) => e instanceof InputError && /world 7, but there are 2/.test(e.message),
  );
  assert.throws(() => trainWorlds("multihop", OPTIONS, 0, 4), /need a whole number >= 1, got 0/);
  assert.throws(() => trainWorlds("multihop", OPTIONS, 2, 4, -1), /first world must be a whole number >= 0, got -1/);
  await assert.rejects(
    loadTask({ name: "multihop", module: "./agent.mjs", options: {}, worlds: 2 }),
    /task.worlds: only a built-in task/,
  );
  assert.throws(() => parseConfig({ task: { name: "multihop", worlds: 0 } }), /worlds/);
  assert.equal(parseConfig({ task: { name: "multihop" } }).task.worlds, 1);
  assert.throws(
    () => parseConfig({ task: { name: "multihop", worlds: 2 }, data: { train: "rows.jsonl" } }, "r.yaml"),
    (e: unknown) =>
      e instanceof InputError &&
      e.message === "r.yaml: task.worlds: the training rows come from data.train; drop one of them",
  );
});

test("the household new-tasks recipe is the GRPO recipe's run with a large pool, sixteen tasks of four, half the rate", () => {
  const grpo = loadConfig("recipes/household-grpo.yaml");
  const fresh = loadConfig("recipes/household-new-tasks.yaml");
  assert.deepEqual(fresh.task.options, { layouts: 4096, train: 4096, val: 64, test: 8 });
  assert.deepEqual([fresh.rollout.n, fresh.train.batchSize, fresh.optim.lr], [4, 16, grpo.optim.lr / 2]);
  const rest = (c: typeof grpo) => ({
    ...c,
    task: undefined,
    optim: { ...c.optim, lr: 0 },
    rollout: { ...c.rollout, n: 0 },
    train: { ...c.train, batchSize: 0 },
  });
  assert.deepEqual(rest(fresh), rest(grpo));
});
