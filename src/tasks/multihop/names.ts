/**
 * Made-up names built from syllables ("Velmira", "Dorin Tavo"), so no model
 * can know a fact about them without searching. Every word is unique across
 * the world, so a name never shares a word with another entity's name.
 */
import type { Rng } from "../../util/rng.js";

const SYLLABLES = [
  "ba",
  "da",
  "fe",
  "ga",
  "ki",
  "lo",
  "mu",
  "na",
  "po",
  "ra",
  "si",
  "ta",
  "vo",
  "ze",
  "kel",
  "mar",
  "dor",
  "lin",
  "tav",
  "rus",
  "bel",
  "qui",
  "sha",
  "wen",
  "hol",
  "fin",
  "gor",
  "pel",
  "zan",
  "vik",
];

/** Words of the document and question templates: a name must not be one. */
const RESERVED = new Set(
  "a an the is in on of by and it has was born city river company founded based people km long country where which who what how many more after old when first longer works labs foods motors mills".split(
    " ",
  ),
);

export class NameGenerator {
  private readonly used = new Set<string>();

  constructor(private readonly rng: Rng) {}

  /** A fresh capitalized word of `syllables` syllables (one more after many collisions). */
  word(syllables: number): string {
    for (let attempt = 0; ; attempt++) {
      const n = syllables + Math.floor(attempt / 40);
      let w = "";
      for (let i = 0; i < n; i++) w += SYLLABLES[this.rng.int(SYLLABLES.length)];
      if (this.used.has(w) || RESERVED.has(w)) continue;
      this.used.add(w);
      return w[0].toUpperCase() + w.slice(1);
    }
  }

  /** 2 or 3 syllables. */
  shortWord(): string {
    return this.word(2 + this.rng.int(2));
  }
}
