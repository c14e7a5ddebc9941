/**
 * The synthetic world behind the multi-hop task: rivers, cities, people and
 * companies with made-up names, numeric attributes and relations:
 *   city    -- on a river (and in that river's country), founded, population
 *   person  -- born in a city, born (year), occupation
 *   company -- founded (year) by a person, based in a city
 * Each split has its own entities and every relation stays inside the split,
 * so a split's questions only involve that split's entities.
 */
import { Rng } from "../../util/rng.js";
import type { Split } from "../types.js";
import { GENERATION_ORDER, splitStream } from "../common/splits.js";
import { NameGenerator } from "./names.js";

export interface River {
  kind: "river";
  name: string;
  split: Split;
  country: string;
  length: number;
}
export interface City {
  kind: "city";
  name: string;
  split: Split;
  country: string;
  river: string;
  founded: number;
  population: number;
}
export interface Person {
  kind: "person";
  name: string;
  split: Split;
  occupation: string;
  birthplace: string;
  born: number;
}
export interface Company {
  kind: "company";
  name: string;
  split: Split;
  founded: number;
  founder: string;
  hq: string;
}
export type Entity = River | City | Person | Company;

export interface SplitWorld {
  rivers: River[];
  cities: City[];
  people: Person[];
  companies: Company[];
}

export interface World {
  countries: string[];
  splits: Record<Split, SplitWorld>;
  /** Every entity by name, in generation order (test, val, train). */
  byName: Map<string, Entity>;
}

/** Entity counts for a split with n questions (0 questions: no entities). */
export function worldSizes(n: number): { rivers: number; cities: number; companies: number } {
  if (n === 0) return { rivers: 0, cities: 0, companies: 0 };
  return {
    rivers: Math.max(4, Math.ceil(n / 12)),
    cities: Math.max(6, Math.ceil(n / 6)),
    companies: Math.max(6, Math.ceil(n / 4)),
  };
}

const OCCUPATIONS = ["painter", "engineer", "doctor", "writer", "farmer", "teacher", "singer", "baker"];
const SUFFIXES = ["Works", "Labs", "Foods", "Motors", "Mills"];
const COUNTRIES = 6;

const between = (rng: Rng, lo: number, hi: number) => lo + rng.int(hi - lo + 1);
const pick = <T>(rng: Rng, xs: readonly T[]): T => xs[rng.int(xs.length)];

function generateSplit(split: Split, n: number, names: NameGenerator, rng: Rng, countries: string[]): SplitWorld {
  const size = worldSizes(n);
  const rivers: River[] = Array.from({ length: size.rivers }, () => ({
    kind: "river",
    name: names.word(2),
    split,
    country: pick(rng, countries),
    length: between(rng, 40, 2000),
  }));
  const cities: City[] = Array.from({ length: size.cities }, () => {
    const river = pick(rng, rivers);
    return {
      kind: "city",
      name: names.shortWord(),
      split,
      country: river.country,
      river: river.name,
      founded: between(rng, 1100, 1899),
      population: between(rng, 5, 900) * 1000,
    };
  });
  const people: Person[] = [];
  const companies: Company[] = [];
  for (let i = 0; i < size.companies; i++) {
    const founded = between(rng, 1850, 2019);
    const person: Person = {
      kind: "person",
      name: `${names.word(2)} ${names.word(2)}`,
      split,
      occupation: pick(rng, OCCUPATIONS),
      birthplace: pick(rng, cities).name,
      born: founded - between(rng, 22, 60),
    };
    people.push(person);
    companies.push({
      kind: "company",
      name: `${names.shortWord()} ${pick(rng, SUFFIXES)}`,
      split,
      founded,
      founder: person.name,
      hq: pick(rng, cities).name,
    });
  }
  return { rivers, cities, people, companies };
}

/** Deterministic for (seed, sizes); the test and val worlds do not depend on the train size. */
export function generateWorld(seed: number, questions: Record<Split, number>): World {
  const names = new NameGenerator(new Rng(seed, 1));
  const countries = Array.from({ length: COUNTRIES }, () => `${names.word(2)}land`);
  const splits = {} as Record<Split, SplitWorld>;
  const byName = new Map<string, Entity>();
  for (const split of GENERATION_ORDER) {
    splits[split] = generateSplit(split, questions[split], names, new Rng(seed, 20 + splitStream(split)), countries);
    const s = splits[split];
    for (const e of [...s.rivers, ...s.cities, ...s.people, ...s.companies]) byName.set(e.name, e);
  }
  return { countries, splits, byName };
}
