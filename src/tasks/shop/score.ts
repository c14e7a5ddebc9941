/**
 * The purchase score, WebShop's formula in our own terms. When the agent
 * clicks Buy Now on product p with option values `chosen`:
 *
 *   base  = (attributes of the goal that p has
 *            + option kinds of the goal whose chosen value is the wanted one
 *            + 1 if p's price is lower than the budget)
 *           / (goal attributes + goal options + 1)
 *   score = base × typeFactor
 *
 * typeFactor says how well p's product type and category agree with the goal's:
 *   1    p is of the goal's product type ("hand cream" for "hand cream");
 *   0.5  another type of the same category sharing a word with it ("face cream" for "hand cream");
 *   0.1  another type of the same category sharing no word ("shampoo" for "hand cream");
 *   0    a product of another category.
 * Success: score = 1 (every attribute, every option and the price right, the right type).
 * An option not chosen counts as not matching (the product page preselects nothing).
 */
import type { Product } from "./catalogue.js";
import type { Goal } from "./instructions.js";

export interface PurchaseScore {
  score: number;
  success: boolean;
  attributeMatches: number;
  optionMatches: number;
  priceOk: boolean;
  typeFactor: number;
}

export function typeFactor(goal: Pick<Goal, "type" | "category">, p: Pick<Product, "type" | "category">): number {
  if (p.category !== goal.category) return 0;
  if (p.type === goal.type) return 1;
  const words = new Set(goal.type.split(" "));
  return p.type.split(" ").some((w) => words.has(w)) ? 0.5 : 0.1;
}

export function scorePurchase(
  goal: Goal,
  p: Pick<Product, "type" | "category" | "attributes" | "price">,
  chosen: Record<string, string>,
): PurchaseScore {
  const attributeMatches = goal.attributes.filter((a) => p.attributes.includes(a)).length;
  const optionMatches = Object.entries(goal.options).filter(([k, v]) => chosen[k] === v).length;
  const priceOk = p.price < goal.budget;
  const total = goal.attributes.length + Object.keys(goal.options).length + 1;
  const factor = typeFactor(goal, p);
  const score = ((attributeMatches + optionMatches + (priceOk ? 1 : 0)) / total) * factor;
  return { score, success: score === 1, attributeMatches, optionMatches, priceOk, typeFactor: factor };
}
