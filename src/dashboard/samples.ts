/**
 * Sample trajectories of a run directory: samples/iter-N.jsonl, one decoded trajectory per line.
 * Only files inside the run directory count (run-files.ts): a link out of it is not listed or read.
 */
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { parseJsonObject } from "./json-line.js";
import { readRunFile, runFile } from "./run-files.js";

const SAMPLE_FILE = /^iter-(\d+)\.jsonl$/;

/** Iterations that have a samples file, newest first. */
export function sampleIterations(runDir: string): number[] {
  const dir = join(runDir, "samples");
  if (!existsSync(dir)) return [];
  const found: number[] = [];
  for (const name of readdirSync(dir)) {
    const m = SAMPLE_FILE.exec(name);
    if (m && runFile(runDir, join(dir, name)) !== undefined) found.push(Number(m[1]));
  }
  return found.sort((a, b) => b - a);
}

export interface SampleFile {
  iteration: number;
  trajectories: Record<string, unknown>[];
  /** Lines that did not parse (a file caught while being written) or nested too deep to serve. */
  skipped: number;
}

/** The trajectories of one iteration, or undefined when it has no samples file (in the run directory). */
export function readSamples(runDir: string, iteration: number): SampleFile | undefined {
  const text = readRunFile(runDir, join(runDir, "samples", `iter-${iteration}.jsonl`));
  if (text === undefined) return undefined;
  const trajectories: Record<string, unknown>[] = [];
  let skipped = 0;
  for (const line of text.split("\n")) {
    if (!line.trim()) continue;
    const v = parseJsonObject(line);
    if (v) trajectories.push(v);
    else skipped++;
  }
  return { iteration, trajectories, skipped };
}
