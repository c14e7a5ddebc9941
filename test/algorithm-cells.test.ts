/**
 * The algorithms x tasks table's cells (bench/algorithm-cells.ts): every task's recipe exists and
 * names its task, each algorithm is overrides of the GRPO recipe, and the household and shop
 * recipe files for StepPO and GiGPO parse to exactly those cells' settings.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { cellPaths, flatten, TABLE_ALGORITHMS, TABLE_TASKS } from "../bench/algorithm-cells.js";
import { loadConfig } from "../src/train/load-config.js";
import { packageRoot } from "../src/util/package-root.js";

const root = packageRoot();

test("flatten: nested settings become key.path=value overrides, leaves only", () => {
  assert.deepEqual(flatten({ a: { b: 1, c: { d: "x" } }, e: true }), ["a.b=1", "a.c.d=x", "e=true"]);
});

test("every task's recipe exists, names its task, and takes every algorithm's overrides", () => {
  for (const task of Object.keys(TABLE_TASKS)) {
    const cell = cellPaths(root, task);
    assert.ok(existsSync(cell.recipe), cell.recipe);
    for (const [name, overrides] of Object.entries(TABLE_ALGORITHMS)) {
      const cfg = loadConfig(cell.recipe, overrides);
      assert.equal(cfg.task.name, task);
      const want = { grpo: "grpo", ppo: "gae-step", steppo: "gae-step", gigpo: "gigpo", rloo: "rloo" }[name];
      if (want) assert.equal(cfg.algorithm.estimator, want, `${task} ${name}`);
    }
    const steppo = loadConfig(cell.recipe, TABLE_ALGORITHMS.steppo);
    assert.deepEqual([steppo.loss.type, steppo.loss.clipLow, steppo.loss.clipHigh], ["gspo", 3e-4, 4e-4]);
  }
});

test("the household and shop StepPO and GiGPO recipes equal the GRPO recipe with the cell's overrides", () => {
  for (const task of ["household", "shop"])
    for (const algorithm of ["steppo", "gigpo"]) {
      const file = `${root}/recipes/${task}-${algorithm}.yaml`;
      const { preset, ...fromFile } = loadConfig(file); // the preset's name is kept; its keys are compared
      assert.equal(preset, algorithm === "steppo" ? "steppo" : undefined);
      assert.deepEqual(
        fromFile,
        loadConfig(cellPaths(root, task).recipe, TABLE_ALGORITHMS[algorithm]),
        `${task}-${algorithm}.yaml`,
      );
    }
});
