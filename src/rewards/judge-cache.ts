/**
 * The judge's answers, remembered: the key is a SHA-256 of everything that decides an answer (the
 * judge's model, the mode, the rubric, the task's text and the rendered trajectories, in order), so
 * the same group (or, in single mode, the same trajectory) asked again makes no call. Only good
 * scores are kept, never a failure. At most `size` entries; past that the oldest one goes (a hit
 * makes an entry the newest again).
 */
import { createHash } from "node:crypto";

/** The cache key of one judge question. */
export function judgeCacheKey(parts: {
  model: string;
  mode: string;
  rubric: string;
  task: string;
  texts: string[];
}): string {
  const h = createHash("sha256");
  // Each part with its length first, so no two different lists of parts give the same bytes.
  for (const p of [parts.model, parts.mode, parts.rubric, parts.task, ...parts.texts]) h.update(`${p.length}:${p}\n`);
  return h.digest("hex");
}

export class JudgeCache {
  private readonly entries = new Map<string, number[]>();

  constructor(private readonly size: number) {}

  get(key: string): number[] | undefined {
    const hit = this.entries.get(key);
    if (hit === undefined) return undefined;
    this.entries.delete(key);
    this.entries.set(key, hit);
    return hit.slice();
  }

  set(key: string, scores: number[]): void {
    if (this.size === 0) return;
    this.entries.delete(key);
    this.entries.set(key, scores.slice());
    while (this.entries.size > this.size) this.entries.delete(this.entries.keys().next().value!);
  }

  get length(): number {
    return this.entries.size;
  }
}
