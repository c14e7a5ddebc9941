/**
 * Long-horizon questions for the multi-hop task (task option `hops: N`): which of N cities and
 * companies of the split was founded first. Each entity takes its own search, and the year it
 * gives has to be remembered until the answer, so an episode makes N searches and one answer.
 * With the shipped tokenizer the expert's episode takes ~430 tokens of prompt and ~170 a search:
 * 900-960 tokens at N = 3, over the default context (rollout.maxTotalTokens 1024) from N = 4 on.
 * A loop that only appends is cut off before it answers; one that compacts
 * (src/agent/compaction-flow.ts) finishes if its summaries keep what is left to search and the
 * earliest so far. The expert's thoughts carry the earliest so far, as a good summary does.
 */
import { InputError } from "../../util/errors.js";
import { Rng } from "../../util/rng.js";
import type { Split } from "../types.js";
import { GENERATION_ORDER, shuffle, splitStream } from "../common/splits.js";
import type { Question } from "./questions.js";
import type { City, Company, SplitWorld, World } from "./world.js";

export const LONG_HORIZON_TYPE = "earliest_founded";
export const MIN_HOPS = 3;
export const MAX_HOPS = 24;

type Founded = City | Company;

/**
 * Which entities a question lists. Cities are founded in 1100–1899 and companies in 1850–2019
 * (world.ts), so over both the answer is always a city and naming one is a guess that often pays;
 * over one kind no such prior names it.
 */
export const HOPS_OVER = ["both", "cities", "companies"] as const;
export type HopsOver = (typeof HOPS_OVER)[number];

const entitiesOf = (s: SplitWorld, over: HopsOver): Founded[] =>
  over === "cities" ? s.cities : over === "companies" ? s.companies : [...s.cities, ...s.companies];

/**
 * The question counts a long-horizon world is sized for: a question names `hops` entities, so the
 * world is sized as for `hops` two-hop questions per question (world.ts: a company per four, a city
 * per six). With the plain sizes a split of 64 twelve-hop questions over companies drew 12 of 16,
 * nearly every question listed the split's earliest company, and 48 of the 64 had one answer; sized
 * by mentions, each company is in about four questions and the answers spread over dozens of names.
 */
export function longHorizonWorldSizes(sizes: Record<Split, number>, hops: number): Record<Split, number> {
  return { train: sizes.train * hops, val: sizes.val * hops, test: sizes.test * hops };
}

/** `n` entities of the split with pairwise different founding years, in a random order (undefined when none found quickly). */
function distinctlyFounded(rng: Rng, s: SplitWorld, n: number, over: HopsOver): Founded[] | undefined {
  const pool: Founded[] = shuffle(rng, entitiesOf(s, over));
  const years = new Set<number>();
  const out: Founded[] = [];
  for (const x of pool) {
    if (years.has(x.founded)) continue;
    years.add(x.founded);
    out.push(x);
    if (out.length === n) return out;
  }
  return undefined;
}

const listed = (names: string[]) => `${names.slice(0, -1).join(", ")} or ${names[names.length - 1]}`;

/** One question over `hops` entities: the plan searches them in the order asked. */
export function earliestFounded(rng: Rng, s: SplitWorld, hops: number, over: HopsOver = "both"): Question | undefined {
  const xs = distinctlyFounded(rng, s, hops, over);
  if (!xs) return undefined;
  const thoughts = [`Find when ${xs[0].name} was founded.`];
  let best = xs[0];
  xs.forEach((x, i) => {
    if (x.founded < best.founded) best = x;
    const found = `${x.name} was founded in ${x.founded}`;
    thoughts.push(
      i < xs.length - 1
        ? `${found}; the earliest so far is ${best.name} (${best.founded}). Find when ${xs[i + 1].name} was founded.`
        : `${found}, so ${best.name} (${best.founded}) was founded first.`,
    );
  });
  return {
    type: LONG_HORIZON_TYPE,
    question: `Which was founded first: ${listed(xs.map((x) => x.name))}?`,
    answer: best.name,
    searches: xs.map((x) => x.name),
    thoughts,
    blindGuess: xs[0].name,
    firstHopGuess: xs[0].name,
  };
}

/** `sizes[split]` distinct long-horizon questions per split, deterministic for (world, seed, sizes, hops). */
export function generateLongQuestions(
  world: World,
  seed: number,
  sizes: Record<Split, number>,
  hops: number,
  over: HopsOver = "both",
): Record<Split, Question[]> {
  const out = {} as Record<Split, Question[]>;
  for (const split of GENERATION_ORDER) {
    const s = world.splits[split];
    const entities = entitiesOf(s, over).length;
    const what = over === "both" ? "cities and companies" : over;
    if (sizes[split] > 0 && entities < hops)
      throw new InputError(
        `multihop: hops ${hops} needs ${hops} ${what} in the ${split} split's world, which has ${entities}`,
        `ask for fewer hops, or more ${split} questions (a bigger world)`,
      );
    const rng = new Rng(seed, 50 + splitStream(split));
    const seen = new Set<string>();
    const qs: Question[] = [];
    for (let misses = 0; qs.length < sizes[split];) {
      const q = earliestFounded(rng, s, hops, over);
      if (q === undefined || seen.has(q.question)) {
        if (++misses >= 200)
          throw new InputError(
            `multihop: cannot draw ${sizes[split]} distinct ${split} questions of ${hops} hops from its world`,
            `ask for fewer hops, or for more ${split} questions (the world grows with them)`,
          );
        continue;
      }
      misses = 0;
      seen.add(q.question);
      qs.push(q);
    }
    out[split] = qs;
  }
  return out;
}
