/**
 * The instruction's criteria as the agent can check them on the pages it sees,
 * without knowing the target product. A results line
 * ("P1234 Brand attr attr type $12", the title being brand, attributes and
 * type) shows a product's type, its attributes and its price; the item page
 * shows the option values it offers. A product whose line matches and whose
 * page offers every wanted value scores 1 once those values are chosen.
 */
import type { Product } from "./catalogue.js";
import { optionPhrase, type Goal } from "./instructions.js";

/** Whether p's results line shows the goal's product type, every wanted attribute and a price under the budget. */
export function listedMatch(goal: Goal, p: Product): boolean {
  return p.type === goal.type && goal.attributes.every((a) => p.attributes.includes(a)) && p.price < goal.budget;
}

/** The wanted option values p's item page does not offer, as phrases ("color gray", "2 pack"), in the goal's order. */
export function missingOptions(goal: Goal, p: Product): string[] {
  return Object.entries(goal.options)
    .filter(([kind, value]) => !p.options[kind]?.includes(value))
    .map(([kind, value]) => optionPhrase(kind, value));
}
