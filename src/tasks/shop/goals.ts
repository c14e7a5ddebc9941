/**
 * The instructions of each split. Target products are drawn without
 * replacement from one shuffled order of the catalogue: test first, then val,
 * then train, so the held-out splits do not depend on the train size and no
 * two splits share a target. All splits shop in the same catalogue (a test
 * target sits among the products train instructions were written from).
 *
 * A candidate is kept only when the expert, which decides from the pages
 * alone (expert.ts), buys a product with score 1 within the step limit (so
 * every instruction is one that visible play solves; the product need not be
 * the target), and its search results hold a distractor: another product of
 * the same type sharing a wanted attribute that cannot score 1 (an attribute,
 * a wanted option value or the price is wrong). Otherwise the next product
 * is tried.
 */
import { InputError } from "../../util/errors.js";
import { Rng } from "../../util/rng.js";
import { GENERATION_ORDER, shuffle } from "../common/splits.js";
import type { Split } from "../types.js";
import type { Catalogue, Product } from "./catalogue.js";
import { MAX_STEPS } from "./env.js";
import { expertSteps } from "./expert.js";
import { goalQuery, makeGoal, type Goal } from "./instructions.js";
import { scorePurchase } from "./score.js";
import type { ShopSearch } from "./search.js";
import { ShopSim } from "./simulator.js";

/** Whether p could score 1 for the goal with the best choice of its options. */
export function canSatisfy(goal: Goal, p: Product): boolean {
  const chosen: Record<string, string> = {};
  for (const [k, v] of Object.entries(goal.options)) if (p.options[k]?.includes(v)) chosen[k] = v;
  return scorePurchase(goal, p, chosen).success;
}

export function hasDistractor(goal: Goal, catalogue: Catalogue, ids: readonly string[]): boolean {
  return ids.some((id) => {
    const p = catalogue.byId.get(id)!;
    return (
      id !== goal.target &&
      p.type === goal.type &&
      goal.attributes.some((a) => p.attributes.includes(a)) &&
      !canSatisfy(goal, p)
    );
  });
}

/** The expert's steps played on a fresh simulator: the purchase's score, or 0 (also past the step limit). */
export function expertScore(goal: Goal, catalogue: Catalogue, search: ShopSearch): number {
  const steps = expertSteps(goal, catalogue, search);
  if (!steps || steps.length > MAX_STEPS) return 0;
  const sim = new ShopSim(catalogue, search, goal);
  for (const s of steps) {
    const r = sim.act(s.command);
    if (r.ok && r.bought) return r.bought.score;
  }
  return 0;
}

export function generateGoals(
  catalogue: Catalogue,
  search: ShopSearch,
  seed: number,
  sizes: Record<Split, number>,
): Record<Split, Goal[]> {
  const order = shuffle(new Rng(seed, 201), catalogue.products.slice());
  const out = {} as Record<Split, Goal[]>;
  let next = 0;
  for (const split of GENERATION_ORDER) {
    out[split] = [];
    while (out[split].length < sizes[split]) {
      if (next >= order.length)
        throw new InputError(
          `shop: the catalogue of ${catalogue.products.length} products cannot give ${sizes.train + sizes.val + sizes.test} instructions`,
          "raise the catalogue size or ask for fewer rows",
        );
      const p = order[next++];
      const goal = makeGoal(new Rng(seed, 300_000 + Number(p.id.slice(1))), p);
      if (expertScore(goal, catalogue, search) !== 1) continue;
      if (!hasDistractor(goal, catalogue, search.search(goalQuery(goal)))) continue;
      out[split].push(goal);
    }
  }
  return out;
}
