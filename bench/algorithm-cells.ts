/**
 * The cells of the algorithms x tasks table (docs/algorithms-table.md, in the shape of Agent-R1's): each
 * task's GRPO recipe and committed base, and each algorithm as `key.path=value` overrides of that
 * recipe, so every cell differs from its row's GRPO cell only where the algorithm does.
 *
 *   grpo          the recipe as written
 *   ppo           PPO with a critic and step-level GAE (gae-step), the recipe's PPO loss
 *   steppo        Agent-R1's StepPO: the `steppo` preset's keys (src/train/presets.ts)
 *   gigpo         GiGPO's estimator (anchor states from the env's info.state)
 *   rloo          the leave-one-out baseline
 *   reinforce++   REINFORCE++'s whitened discounted returns
 *
 * The household and shop recipes for steppo and gigpo exist as files too (recipes/*-steppo.yaml,
 * *-gigpo.yaml); test/algorithm-cells.test.ts checks they equal these overrides.
 */
import { join } from "node:path";
import { RECIPE_PRESETS } from "../src/train/presets.js";
import type { Split } from "../src/tasks/types.js";

export interface TaskCell {
  recipe: string;
  base: string;
  /** Splits evaluated besides test (household: val holds the seen houses, test the unseen ones). */
  alsoEvaluate: Split[];
}

export const TABLE_TASKS: Record<string, TaskCell> = {
  multihop: { recipe: "recipes/multihop-grpo.yaml", base: "assets/base/multihop", alsoEvaluate: [] },
  calc: { recipe: "recipes/calc-grpo.yaml", base: "assets/base/calc", alsoEvaluate: [] },
  household: { recipe: "recipes/household-grpo.yaml", base: "assets/base/household", alsoEvaluate: ["val"] },
  shop: { recipe: "recipes/shop-grpo.yaml", base: "assets/base/shop", alsoEvaluate: [] },
};

/** A nested settings object as `key.path=value` overrides (leaves only). */
export function flatten(o: Record<string, unknown>, prefix = ""): string[] {
  return Object.entries(o).flatMap(([k, v]) =>
    typeof v === "object" && v !== null && !Array.isArray(v)
      ? flatten(v as Record<string, unknown>, `${prefix}${k}.`)
      : [`${prefix}${k}=${String(v)}`],
  );
}

export const TABLE_ALGORITHMS: Record<string, string[]> = {
  grpo: [],
  ppo: ["algorithm.estimator=gae-step"],
  steppo: flatten(RECIPE_PRESETS.steppo),
  gigpo: ["algorithm.estimator=gigpo"],
  rloo: ["algorithm.estimator=rloo"],
  "reinforce++": ["algorithm.estimator=reinforce++"],
};

export function cellPaths(root: string, task: string): TaskCell {
  const c = TABLE_TASKS[task];
  return { ...c, recipe: join(root, c.recipe), base: join(root, c.base) };
}
