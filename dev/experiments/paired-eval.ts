/**
 * Two models played on the same rows with the same rollout seed (`agent-r1 eval ... --seed S --episodes
 * FILE` for each) compared episode by episode: each one's exact match over the episodes both files hold,
 * how many only one got right, and the sign test on those (z = (onlyB − onlyA) / √(onlyA + onlyB)). Rows
 * both get right or both get wrong say nothing about which is better; with the same seed the two models
 * draw the same random numbers, so on rows where they agree the comparison carries none of the sampling
 * noise that two independent figures do.
 *   node --import tsx dev/experiments/paired-eval.ts A.jsonl B.jsonl
 */
import { readFileSync } from "node:fs";
import { required } from "./usage.js";

/** What the comparison reads of an `eval --episodes` line. */
export interface EpisodeLine {
  row: number;
  sample: number;
  em: number;
}

export interface PairedComparison {
  /** Episodes (row and sample) in both files. */
  n: number;
  emA: number;
  emB: number;
  /** Episodes only A, or only B, got right. */
  onlyA: number;
  onlyB: number;
  /** The sign test's z on the episodes only one got right (0 when there are none). */
  z: number;
}

export function pairedComparison(a: readonly EpisodeLine[], b: readonly EpisodeLine[]): PairedComparison {
  const key = (e: EpisodeLine) => `${e.row}:${e.sample}`;
  const byKey = new Map(b.map((e) => [key(e), e]));
  let n = 0,
    rightA = 0,
    rightB = 0,
    onlyA = 0,
    onlyB = 0;
  for (const e of a) {
    const f = byKey.get(key(e));
    if (f === undefined) continue;
    n++;
    const [x, y] = [e.em >= 1, f.em >= 1];
    rightA += Number(x);
    rightB += Number(y);
    if (x && !y) onlyA++;
    if (y && !x) onlyB++;
  }
  const z = onlyA + onlyB === 0 ? 0 : (onlyB - onlyA) / Math.sqrt(onlyA + onlyB);
  return { n, emA: n ? rightA / n : 0, emB: n ? rightB / n : 0, onlyA, onlyB, z };
}

function readEpisodes(path: string): EpisodeLine[] {
  return readFileSync(path, "utf8")
    .split("\n")
    .filter((l) => l.trim() !== "")
    .map((l, i) => {
      const e = JSON.parse(l) as Partial<EpisodeLine>;
      if (typeof e.row !== "number" || typeof e.sample !== "number" || typeof e.em !== "number") {
        console.error(`paired-eval: ${path} line ${i + 1}: not an eval --episodes line (row, sample, em)`);
        process.exit(1);
      }
      return e as EpisodeLine;
    });
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const USAGE = "node --import tsx dev/experiments/paired-eval.ts A.jsonl B.jsonl";
  const [fa, fb] = [required(process.argv[2], "A.jsonl", USAGE), required(process.argv[3], "B.jsonl", USAGE)];
  const c = pairedComparison(readEpisodes(fa), readEpisodes(fb));
  const pct = (x: number) => `${(100 * x).toFixed(1)} %`;
  console.log(`${c.n} episodes in both: A ${pct(c.emA)}, B ${pct(c.emB)}`);
  console.log(`right in A only ${c.onlyA}, in B only ${c.onlyB}; sign test z = ${c.z.toFixed(2)} (B over A)`);
}
