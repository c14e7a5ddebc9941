/**
 * Arithmetic word problems (the GSM8K analogue): a few fixed templates with
 * small integers, 2-3 operations each, integer answers. Each problem carries
 * the expression an expert types into the calculator, and a `slip`: a typical
 * wrong expression (one step left out) for the imperfect demonstrations.
 */
import type { Rng } from "../../util/rng.js";

export interface CalcProblem {
  template: string;
  question: string;
  expression: string;
  answer: number;
  slip: string;
  /** The numbers in the question, in order (a blind guess picks one). */
  numbers: number[];
}

const NAMES = [
  "Ana",
  "Ben",
  "Cora",
  "Dev",
  "Eli",
  "Fay",
  "Gus",
  "Hana",
  "Ivo",
  "June",
  "Kai",
  "Lia",
  "Milo",
  "Nia",
  "Omar",
  "Pia",
];

/** Integer in [lo, hi]. */
const between = (rng: Rng, lo: number, hi: number) => lo + rng.int(hi - lo + 1);
const pick = <T>(rng: Rng, xs: readonly T[]): T => xs[rng.int(xs.length)];

type Make = (rng: Rng, name: string) => Omit<CalcProblem, "template" | "answer">;

/** template id -> problem maker. Answers are computed from `expression` by the caller. */
export const CALC_TEMPLATES: Record<string, Make> = {
  bags(rng, n) {
    const a = between(rng, 2, 30),
      b = between(rng, 2, 9),
      c = between(rng, 2, 12);
    return {
      question: `${n} has ${a} apples and buys ${b} bags of ${c} apples. How many apples does ${n} have now?`,
      expression: `${a} + ${b} * ${c}`,
      slip: `${b} * ${c}`,
      numbers: [a, b, c],
    };
  },
  boxes(rng, n) {
    const a = between(rng, 3, 12),
      b = between(rng, 2, 9),
      c = between(rng, 1, a * b - 1);
    return {
      question: `A box holds ${a} pens. ${n} buys ${b} boxes and gives away ${c} pens. How many pens are left?`,
      expression: `${a} * ${b} - ${c}`,
      slip: `${a} * ${b}`,
      numbers: [a, b, c],
    };
  },
  cookies(rng, n) {
    const a = between(rng, 10, 60),
      b = between(rng, 1, a - 2),
      c = between(rng, 2, 9);
    return {
      question: `${n} bakes ${a} cookies, eats ${b} and sells the rest for ${c} dollars each. How many dollars does ${n} make?`,
      expression: `(${a} - ${b}) * ${c}`,
      slip: `${a} * ${c}`,
      numbers: [a, b, c],
    };
  },
  share(rng, n) {
    const b = between(rng, 2, 9),
      k = between(rng, 2, 12),
      c = between(rng, 1, 9);
    return {
      question: `${n} shares ${b * k} stickers equally among ${b} friends, then gives each friend ${c} more. How many stickers does each friend have?`,
      expression: `${b * k} / ${b} + ${c}`,
      slip: `${b * k} / ${b}`,
      numbers: [b * k, b, c],
    };
  },
  chapters(rng, n) {
    const c = between(rng, 2, 9),
      total = c * between(rng, 2, 12),
      a = between(rng, 1, total - 1);
    return {
      question: `${n} reads ${a} pages on Monday and ${total - a} pages on Tuesday. A chapter has ${c} pages. How many chapters did ${n} read?`,
      expression: `(${a} + ${total - a}) / ${c}`,
      slip: `${a} + ${total - a}`,
      numbers: [a, total - a, c],
    };
  },
  packs(rng, n) {
    const a = between(rng, 2, 9),
      b = between(rng, 2, 12),
      c = between(rng, 2, 9),
      d = between(rng, 2, 12);
    return {
      question: `${n} buys ${a} packs of ${b} cards and ${c} packs of ${d} cards. How many cards does ${n} buy?`,
      expression: `${a} * ${b} + ${c} * ${d}`,
      slip: `${a} * ${b}`,
      numbers: [a, b, c, d],
    };
  },
  shelves(rng, n) {
    const a = between(rng, 3, 9),
      b = between(rng, 5, 20),
      c = between(rng, 2, 4),
      d = between(rng, 1, Math.floor((a * b - 1) / c));
    return {
      question: `A shop has ${a} shelves of ${b} books. ${n} buys ${c} boxes of ${d} books. How many books are left in the shop?`,
      expression: `${a} * ${b} - ${c} * ${d}`,
      slip: `${a} * ${b} - ${d}`,
      numbers: [a, b, c, d],
    };
  },
};

export const CALC_TEMPLATE_IDS = Object.keys(CALC_TEMPLATES);

export function makeProblem(rng: Rng, template: string, evaluate: (e: string) => number): CalcProblem {
  const p = CALC_TEMPLATES[template](rng, pick(rng, NAMES));
  return { template, ...p, answer: evaluate(p.expression) };
}
