/** Sample trajectories of a run directory: samples/iter-N.jsonl, one decoded trajectory per line. */
import { existsSync, readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";

const SAMPLE_FILE = /^iter-(\d+)\.jsonl$/;

/** Iterations that have a samples file, newest first. */
export function sampleIterations(runDir: string): number[] {
  const dir = join(runDir, "samples");
  if (!existsSync(dir)) return [];
  const found: number[] = [];
  for (const name of readdirSync(dir)) {
    const m = SAMPLE_FILE.exec(name);
    if (m) found.push(Number(m[1]));
  }
  return found.sort((a, b) => b - a);
}

export interface SampleFile {
  iteration: number;
  trajectories: Record<string, unknown>[];
  /** Lines that did not parse (a file caught while being written). */
  skipped: number;
}

/** The trajectories of one iteration, or undefined when it has no samples file. */
export function readSamples(runDir: string, iteration: number): SampleFile | undefined {
  const file = join(runDir, "samples", `iter-${iteration}.jsonl`);
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw e;
  }
  const trajectories: Record<string, unknown>[] = [];
  let skipped = 0;
  for (const line of text.split("\n")) {
    if (!line.trim()) continue;
    try {
      const v: unknown = JSON.parse(line);
      if (v && typeof v === "object" && !Array.isArray(v)) trajectories.push(v as Record<string, unknown>);
      else skipped++;
    } catch {
      skipped++;
    }
  }
  return { iteration, trajectories, skipped };
}
