/**
 * How many questions of each type a split gets. The nine types fall in three
 * kinds (bridge, comparison, numeric); a mix gives each kind a relative
 * weight, shared equally by its three types. The default follows HotpotQA,
 * whose questions are mostly bridge questions with about a fifth comparisons:
 * bridge 0.7, comparison 0.15, numeric 0.15.
 */
import { z } from "zod";

export const QUESTION_KINDS = {
  bridge: ["founder_birthplace", "birth_country", "hq_river"],
  comparison: ["founded_first", "more_people", "longer_river"],
  numeric: ["years_between", "founder_age", "population_gap"],
} as const;
export type QuestionKind = keyof typeof QUESTION_KINDS;
export type QuestionType = (typeof QUESTION_KINDS)[QuestionKind][number];
export const QUESTION_TYPES: readonly QuestionType[] = Object.values(QUESTION_KINDS).flat();

export type TypeMix = Record<QuestionKind, number>;
export const DEFAULT_TYPE_MIX: TypeMix = { bridge: 0.7, comparison: 0.15, numeric: 0.15 };

/** Task options for the mix (relative weights, at least one positive). */
export const typeMixOptions = {
  bridge: z.number().nonnegative().default(DEFAULT_TYPE_MIX.bridge).describe("Relative weight of bridge questions."),
  comparison: z
    .number()
    .nonnegative()
    .default(DEFAULT_TYPE_MIX.comparison)
    .describe("Relative weight of comparison questions."),
  numeric: z
    .number()
    .nonnegative()
    .default(DEFAULT_TYPE_MIX.numeric)
    .describe("Relative weight of questions that need the calculator."),
};

/**
 * The type of each of n questions: counts by largest remainder of
 * n * weight(type) / total, each type's questions spread evenly over the
 * sequence (question j of a type with c questions sits near (j + 0.5) / c).
 * Pure and deterministic.
 */
export function typeSchedule(n: number, mix: TypeMix): QuestionType[] {
  const total = mix.bridge + mix.comparison + mix.numeric;
  if (!(total > 0)) throw new RangeError("question mix: at least one of bridge, comparison, numeric must be positive");
  const exact = QUESTION_TYPES.map((t) => (n * mix[kindOf(t)]) / 3 / total);
  const counts = exact.map(Math.floor);
  const byRemainder = exact.map((x, i) => [x - Math.floor(x), i] as const).sort((a, b) => b[0] - a[0] || a[1] - b[1]);
  for (let k = 0, left = n - counts.reduce((a, b) => a + b, 0); k < left; k++) counts[byRemainder[k][1]]++;
  const slots = QUESTION_TYPES.flatMap((t, i) =>
    Array.from({ length: counts[i] }, (_, j) => ({ t, at: (j + 0.5) / counts[i], i })),
  );
  return slots.sort((a, b) => a.at - b.at || a.i - b.i).map((s) => s.t);
}

export function kindOf(type: QuestionType): QuestionKind {
  return (Object.keys(QUESTION_KINDS) as QuestionKind[]).find((k) =>
    (QUESTION_KINDS[k] as readonly string[]).includes(type),
  )!;
}
