/**
 * Question templates over a split's world. Each needs two searches; three
 * also need the calculator. A question carries the expert's plan: what to
 * search, one thought per turn, the calculator expression, and the answers a
 * careless policy would give (a blind guess; a guess after the first search).
 *
 *   bridge:     founder_birthplace, birth_country, hq_river
 *   comparison: founded_first, more_people, longer_river
 *   numeric:    years_between, founder_age, population_gap   (search, search, calculator)
 */
import { InputError } from "../../util/errors.js";
import { Rng } from "../../util/rng.js";
import type { Split } from "../types.js";
import { GENERATION_ORDER, shuffle, splitStream } from "../common/splits.js";
import type { City, Company, Entity, SplitWorld, World } from "./world.js";
import { DEFAULT_TYPE_MIX, QUESTION_TYPES, typeSchedule, type QuestionType, type TypeMix } from "./type-mix.js";

export { QUESTION_TYPES, type QuestionType } from "./type-mix.js";

export interface Question {
  /** A template's type, or the long-horizon question's (long-horizon.ts). */
  type: QuestionType | "earliest_founded";
  question: string;
  answer: string;
  searches: string[];
  /** One per assistant turn: before each search, before the calculator, before the answer. */
  thoughts: string[];
  expression?: string;
  blindGuess: string;
  firstHopGuess: string;
}

type Make = (rng: Rng, s: SplitWorld, w: World) => Question | undefined;

const pick = <T>(rng: Rng, xs: readonly T[]): T => xs[rng.int(xs.length)];
const get = <K extends Entity["kind"]>(w: World, name: string, kind: K) =>
  w.byName.get(name) as Extract<Entity, { kind: K }>;

/** Two different items whose key differs (undefined when none found quickly). */
function pair<T>(rng: Rng, xs: readonly T[], key: (x: T) => number): [T, T] | undefined {
  for (let i = 0; i < 20 && xs.length >= 2; i++) {
    const a = pick(rng, xs),
      b = pick(rng, xs);
    if (a !== b && key(a) !== key(b)) return [a, b];
  }
  return undefined;
}

const founded = (x: City | Company) => x.founded;

export const QUESTION_TEMPLATES: Record<QuestionType, Make> = {
  founder_birthplace(rng, s, w) {
    const k = pick(rng, s.companies),
      p = get(w, k.founder, "person");
    return {
      type: "founder_birthplace",
      question: `Where was the founder of ${k.name} born?`,
      answer: p.birthplace,
      searches: [k.name, p.name],
      thoughts: [
        `Find the founder of ${k.name}.`,
        `The founder is ${p.name}. Find where ${p.name} was born.`,
        `${p.name} was born in ${p.birthplace}.`,
      ],
      blindGuess: k.name,
      firstHopGuess: p.name,
    };
  },
  birth_country(rng, s, w) {
    const p = pick(rng, s.people),
      c = get(w, p.birthplace, "city");
    return {
      type: "birth_country",
      question: `In which country was ${p.name} born?`,
      answer: c.country,
      searches: [p.name, c.name],
      thoughts: [
        `Find where ${p.name} was born.`,
        `${p.name} was born in ${c.name}. Find the country of ${c.name}.`,
        `${c.name} is in ${c.country}.`,
      ],
      blindGuess: pick(rng, w.countries),
      firstHopGuess: c.name,
    };
  },
  hq_river(rng, s, w) {
    const k = pick(rng, s.companies),
      c = get(w, k.hq, "city");
    return {
      type: "hq_river",
      question: `Which river flows through the city where ${k.name} is based?`,
      answer: c.river,
      searches: [k.name, c.name],
      thoughts: [
        `Find where ${k.name} is based.`,
        `${k.name} is based in ${c.name}. Find the river of ${c.name}.`,
        `${c.name} is on the ${c.river} river.`,
      ],
      blindGuess: k.name,
      firstHopGuess: c.name,
    };
  },
  founded_first(rng, s) {
    const xy = pair<City | Company>(rng, rng.next() < 0.5 ? s.companies : s.cities, founded);
    if (!xy) return undefined;
    const [x, y] = xy,
      first = x.founded < y.founded ? x : y;
    return {
      type: "founded_first",
      question: `Which was founded first, ${x.name} or ${y.name}?`,
      answer: first.name,
      searches: [x.name, y.name],
      thoughts: [
        `Find when ${x.name} was founded.`,
        `${x.name} was founded in ${x.founded}. Find when ${y.name} was founded.`,
        `${y.name} was founded in ${y.founded}, so ${first.name} was first.`,
      ],
      blindGuess: x.name,
      firstHopGuess: x.name,
    };
  },
  more_people(rng, s) {
    const xy = pair(rng, s.cities, (c) => c.population);
    if (!xy) return undefined;
    const [x, y] = xy,
      more = x.population > y.population ? x : y;
    return {
      type: "more_people",
      question: `Which city has more people, ${x.name} or ${y.name}?`,
      answer: more.name,
      searches: [x.name, y.name],
      thoughts: [
        `Find the population of ${x.name}.`,
        `${x.name} has ${x.population} people. Find the population of ${y.name}.`,
        `${y.name} has ${y.population} people, so ${more.name} has more.`,
      ],
      blindGuess: x.name,
      firstHopGuess: x.name,
    };
  },
  longer_river(rng, s) {
    const xy = pair(rng, s.rivers, (r) => r.length);
    if (!xy) return undefined;
    const [x, y] = xy,
      longer = x.length > y.length ? x : y;
    return {
      type: "longer_river",
      question: `Which river is longer, ${x.name} or ${y.name}?`,
      answer: longer.name,
      searches: [x.name, y.name],
      thoughts: [
        `Find the length of ${x.name}.`,
        `${x.name} is ${x.length} km long. Find the length of ${y.name}.`,
        `${y.name} is ${y.length} km long, so ${longer.name} is longer.`,
      ],
      blindGuess: x.name,
      firstHopGuess: x.name,
    };
  },
  years_between(rng, s) {
    const xy = pair<City | Company>(rng, [...s.cities, ...s.companies], founded);
    if (!xy) return undefined;
    const [x, y] = xy[0].founded < xy[1].founded ? xy : [xy[1], xy[0]];
    const d = y.founded - x.founded;
    return {
      type: "years_between",
      question: `How many years after ${x.name} was ${y.name} founded?`,
      answer: String(d),
      searches: [x.name, y.name],
      expression: `${y.founded} - ${x.founded}`,
      thoughts: [
        `Find when ${x.name} was founded.`,
        `${x.name} was founded in ${x.founded}. Find when ${y.name} was founded.`,
        `${y.name} was founded in ${y.founded}. Subtract ${x.founded} from ${y.founded}.`,
        `The difference is ${d} years.`,
      ],
      blindGuess: String(10 * (1 + rng.int(30))),
      firstHopGuess: String(x.founded),
    };
  },
  founder_age(rng, s, w) {
    const k = pick(rng, s.companies),
      p = get(w, k.founder, "person"),
      age = k.founded - p.born;
    return {
      type: "founder_age",
      question: `How old was the founder of ${k.name} when it was founded?`,
      answer: String(age),
      searches: [k.name, p.name],
      expression: `${k.founded} - ${p.born}`,
      thoughts: [
        `Find the founder of ${k.name}.`,
        `${k.name} was founded in ${k.founded} by ${p.name}. Find when ${p.name} was born.`,
        `${p.name} was born in ${p.born}. Subtract ${p.born} from ${k.founded}.`,
        `${p.name} was ${age} years old.`,
      ],
      blindGuess: String(20 + rng.int(41)),
      firstHopGuess: String(k.founded),
    };
  },
  population_gap(rng, s) {
    const xy = pair(rng, s.cities, (c) => c.population);
    if (!xy) return undefined;
    const [x, y] = xy[0].population > xy[1].population ? xy : [xy[1], xy[0]];
    const d = x.population - y.population;
    return {
      type: "population_gap",
      question: `How many more people live in ${x.name} than in ${y.name}?`,
      answer: String(d),
      searches: [x.name, y.name],
      expression: `${x.population} - ${y.population}`,
      thoughts: [
        `Find the population of ${x.name}.`,
        `${x.name} has ${x.population} people. Find the population of ${y.name}.`,
        `${y.name} has ${y.population} people. Subtract ${y.population} from ${x.population}.`,
        `The difference is ${d} people.`,
      ],
      blindGuess: String(1000 * (1 + rng.int(500))),
      firstHopGuess: String(x.population),
    };
  },
};

/**
 * n distinct questions per split, the types in the shares of `mix`
 * (type-mix.ts; a type that runs out of distinct questions hands its turn to
 * the next type), then shuffled; deterministic for (world, seed, sizes, mix).
 */
export function generateQuestions(
  world: World,
  seed: number,
  sizes: Record<Split, number>,
  mix: TypeMix = DEFAULT_TYPE_MIX,
): Record<Split, Question[]> {
  const out = {} as Record<Split, Question[]>;
  for (const split of GENERATION_ORDER) {
    const rng = new Rng(seed, 30 + splitStream(split));
    const seen = new Set<string>();
    const qs: Question[] = [];
    const schedule = typeSchedule(sizes[split], mix).map((t) => QUESTION_TYPES.indexOf(t));
    for (let shift = 0, misses = 0; qs.length < sizes[split];) {
      if (shift > 2 * QUESTION_TYPES.length)
        throw new InputError(
          `multihop: cannot draw ${sizes[split]} distinct ${split} questions from its world`,
          "ask for fewer questions",
        );
      const q = QUESTION_TEMPLATES[QUESTION_TYPES[(schedule[qs.length] + shift) % QUESTION_TYPES.length]](
        rng,
        world.splits[split],
        world,
      );
      if (q === undefined || seen.has(q.question)) {
        if (++misses >= 50) [shift, misses] = [shift + 1, 0]; // this type is (nearly) used up
        continue;
      }
      misses = 0;
      seen.add(q.question);
      qs.push(q);
    }
    out[split] = shuffle(rng, qs);
  }
  return out;
}
