/**
 * Checkpoints in RUN/checkpoints/step-N/: everything is written into a hidden
 * temporary directory, a manifest of SHA-256 checksums is added last, and the
 * directory is renamed into place; only the last K are kept. Resuming picks the
 * newest checkpoint whose manifest verifies, so a crash mid-write (or a damaged
 * file) falls back to the previous complete one. A write that fails removes its
 * temporary directory and throws a CheckpointError; the earlier checkpoints are
 * never touched before the new one is complete.
 */
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import { AgentR1Error } from "../util/errors.js";

export const MANIFEST = "manifest.json";
export const STATE = "state.json";

function listFiles(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir).sort()) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) out.push(...listFiles(p));
    else out.push(p);
  }
  return out;
}

function sha256(file: string): string {
  return createHash("sha256").update(readFileSync(file)).digest("hex");
}

/** Writing a checkpoint failed; the message names the checkpoint, the cause, and the newest checkpoint left. */
export class CheckpointError extends AgentR1Error {
  constructor(message: string, hint?: string, override readonly cause?: unknown) {
    super(message, hint);
  }
}

export function checkpointsDir(runDir: string): string {
  return join(runDir, "checkpoints");
}

/** Step numbers of the complete-looking checkpoints, newest first. */
export function listCheckpoints(runDir: string): number[] {
  const dir = checkpointsDir(runDir);
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .map((n) => /^step-(\d+)$/.exec(n))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => Number(m[1]))
    .sort((a, b) => b - a);
}

/**
 * Writes checkpoint `step`: `fill(tmpDir)` writes the model files, then the
 * state and the manifest go in, then the rename makes it visible.
 */
export async function writeCheckpoint<S extends object>(runDir: string, step: number, state: S, fill: (dir: string) => Promise<void>, keep: number): Promise<string> {
  const root = checkpointsDir(runDir);
  const final = join(root, `step-${step}`);
  const tmp = join(root, `.tmp-step-${step}-${process.pid}`);
  const failed = (e: unknown): CheckpointError => {
    try {
      rmSync(tmp, { recursive: true, force: true });
    } catch {
      /* the cause is what matters; a leftover temporary directory is removed on resume */
    }
    const older = listCheckpoints(runDir).filter((s) => s !== step);
    const left = older.length ? `the newest earlier checkpoint, ${join(root, `step-${older[0]}`)}, is untouched` : "there is no earlier checkpoint";
    const why = e instanceof Error ? e.message : String(e);
    return new CheckpointError(`${final}: writing the checkpoint failed: ${why}; ${left}`, "fix the cause (disk space, permissions), then continue the run with --resume", e);
  };
  try {
    mkdirSync(root, { recursive: true });
    rmSync(tmp, { recursive: true, force: true });
    mkdirSync(tmp);
    await fill(tmp);
    writeFileSync(join(tmp, STATE), JSON.stringify(state, null, 2) + "\n");
    const files = Object.fromEntries(listFiles(tmp).map((f) => [relative(tmp, f), sha256(f)]));
    writeFileSync(join(tmp, MANIFEST), JSON.stringify({ step, files }, null, 2) + "\n");
    rmSync(final, { recursive: true, force: true });
    renameSync(tmp, final);
  } catch (e) {
    throw failed(e);
  }
  for (const old of listCheckpoints(runDir).slice(keep)) rmSync(join(root, `step-${old}`), { recursive: true, force: true });
  return final;
}

/** Removes temporary directories left by checkpoint writes that never finished (a killed process). */
export function removeUnfinishedCheckpoints(runDir: string): string[] {
  const root = checkpointsDir(runDir);
  if (!existsSync(root)) return [];
  const stale = readdirSync(root).filter((n) => n.startsWith(".tmp-step-"));
  for (const n of stale) rmSync(join(root, n), { recursive: true, force: true });
  return stale;
}

/** Why a checkpoint directory fails verification, or undefined when every file matches its checksum. */
export function verifyCheckpoint(dir: string): string | undefined {
  const manifestPath = join(dir, MANIFEST);
  if (!existsSync(manifestPath)) return "no manifest (the write did not finish)";
  let files: unknown;
  try {
    files = JSON.parse(readFileSync(manifestPath, "utf8")).files;
  } catch {
    return `${MANIFEST} is not valid JSON`;
  }
  if (typeof files !== "object" || files === null || Array.isArray(files)) return `${MANIFEST} has no 'files' checksums`;
  const sums = files as Record<string, unknown>;
  if (!Object.hasOwn(sums, STATE)) return `${MANIFEST} does not list ${STATE}`;
  for (const [rel, sum] of Object.entries(sums)) {
    const p = join(dir, rel);
    if (!existsSync(p)) return `${rel} is missing`;
    if (sha256(p) !== sum) return `${rel} does not match its checksum`;
  }
  return undefined;
}

export interface FoundCheckpoint<S> {
  dir: string;
  step: number;
  state: S;
  /** Newer checkpoints that failed verification, with the reason. */
  skipped: { step: number; reason: string }[];
}

/** The newest checkpoint that verifies, or undefined when there is none. */
export function latestCheckpoint<S>(runDir: string): FoundCheckpoint<S> | undefined {
  return scanCheckpoints<S>(runDir).found;
}

/** The newest checkpoint that verifies (if any), and the newer ones that did not, with the reason. */
export function scanCheckpoints<S>(runDir: string): { found?: FoundCheckpoint<S>; skipped: { step: number; reason: string }[] } {
  const skipped: { step: number; reason: string }[] = [];
  for (const step of listCheckpoints(runDir)) {
    const dir = join(checkpointsDir(runDir), `step-${step}`);
    const bad = verifyCheckpoint(dir);
    if (bad) {
      skipped.push({ step, reason: bad });
      continue;
    }
    return { found: { dir, step, state: JSON.parse(readFileSync(join(dir, STATE), "utf8")) as S, skipped }, skipped };
  }
  return { skipped };
}
