/**
 * Shopping instructions, generated from a target product: one or two of its
 * attributes, one value of each of its option kinds, and a budget above its
 * price (the next multiple of 10 dollars above it, sometimes 10 more). For example
 *   "i need a long lasting lipstick, shade coral, price lower than 20 dollars"
 * Any product of the same type with those attributes, those option values and
 * a price within the budget meets it (score 1), not only the target.
 */
import { Rng } from "../../util/rng.js";
import { sample, type Category, type Product } from "./catalogue.js";

export interface Goal {
  /** The product the instruction was written from. */
  target: string;
  category: Category;
  type: string;
  attributes: string[];
  /** Option kind -> the wanted value (one per option kind of the target). */
  options: Record<string, string>;
  /** Dollars: a price lower than this is within budget. */
  budget: number;
  instruction: string;
}

const OPENERS = ["i need", "i want", "find me", "buy me"];

const article = (w: string) => (/^[aeiou]/.test(w) ? "an" : "a");

/** "color red", "shade coral", "3 pack", "8 ounce" (a value that says its kind stands alone). */
export function optionPhrase(kind: string, value: string): string {
  return ["volume", "length", "pack", "count"].includes(kind) ? value : `${kind} ${value}`;
}

export function makeGoal(rng: Rng, p: Product): Goal {
  const attributes = rng.next() < 0.6 ? p.attributes.slice() : sample(rng, p.attributes, 1);
  const options: Record<string, string> = {};
  for (const [kind, values] of Object.entries(p.options)) options[kind] = values[rng.int(values.length)];
  const budget = (Math.floor(p.price / 10) + 1 + (rng.next() < 0.3 ? 1 : 0)) * 10;
  const what = `${attributes.join(" and ")} ${p.type}`;
  const opts = Object.entries(options).map(([k, v]) => optionPhrase(k, v));
  const instruction =
    `${OPENERS[rng.int(OPENERS.length)]} ${article(what)} ${what}` +
    (opts.length > 0 ? `, ${opts.join(", ")}` : "") +
    `, price lower than ${budget} dollars`;
  return { target: p.id, category: p.category, type: p.type, attributes, options, budget, instruction };
}

/** The words the expert searches with: the attributes and the product type. */
export function goalQuery(g: Goal): string {
  return `${g.attributes.join(" ")} ${g.type}`;
}
