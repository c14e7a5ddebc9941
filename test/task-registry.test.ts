/** The task registry: names, options validated by each task's own schema, errors naming the option and the allowed ones. */
import { test } from "node:test";
import assert from "node:assert/strict";
import { TASKS, getTask } from "../src/tasks/index.js";
import { InputError } from "../src/util/errors.js";

const inputError = (re: RegExp) => (e: unknown) => e instanceof InputError && re.test(e.message);

test("TASKS lists multihop, calc, shop and household; getTask builds them with defaults", () => {
  assert.deepEqual(Object.keys(TASKS), ["multihop", "calc", "shop", "household"]);
  const calc = getTask("calc");
  assert.equal(calc.name, "calc");
  assert.deepEqual([calc.rows("train").length, calc.rows("val").length, calc.rows("test").length], [512, 64, 64]);
  const multihop = getTask("multihop", { train: 20, val: 9, test: 9, topK: 3 });
  assert.deepEqual([multihop.name, multihop.rows("train").length], ["multihop", 20]);
  const [demo] = multihop.demonstrations(multihop.rows("val").slice(0, 1), { seed: 0, quality: 1 });
  assert.equal(demo[3].content.split("\n").length, 3, "topK = 3 documents per search");
});

test("getTask: unknown task, unknown option, bad value", () => {
  assert.throws(() => getTask("hotpot"), inputError(/^unknown task 'hotpot'; tasks: multihop, calc, shop, household$/));
  assert.throws(() => getTask("toString"), inputError(/unknown task 'toString'/));
  assert.throws(
    () => getTask("calc", { trian: 10 }),
    inputError(/^task 'calc': unknown option 'trian'; allowed options: seed, train, val, test$/),
  );
  assert.throws(
    () => getTask("multihop", { k: 3 }),
    inputError(/unknown option 'k'; allowed options: seed, train, val, test, topK/),
  );
  assert.throws(() => getTask("multihop", { topK: 0 }), inputError(/^task 'multihop': option 'topK': /));
  assert.throws(() => getTask("calc", { train: "10" }), inputError(/option 'train': .*expected number/));
  assert.throws(() => getTask("calc", { seed: 1.5 }), inputError(/option 'seed'/));
});

test("a task with empty splits is allowed", () => {
  const t = getTask("multihop", { train: 0, val: 0, test: 3 });
  assert.deepEqual([t.rows("train"), t.rows("val")], [[], []]);
  assert.equal(t.rows("test").length, 3);
});
