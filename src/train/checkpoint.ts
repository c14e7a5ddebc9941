/**
 * Checkpoints in RUN/checkpoints/step-N/: everything is written into a hidden
 * temporary directory, a manifest of SHA-256 checksums is added last, and the
 * directory is renamed into place; only the last K are kept. Resuming picks the
 * newest checkpoint whose manifest verifies, so a crash mid-write (or a damaged
 * file) falls back to the previous complete one.
 */
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";

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
  mkdirSync(root, { recursive: true });
  const tmp = join(root, `.tmp-step-${step}-${process.pid}`);
  rmSync(tmp, { recursive: true, force: true });
  mkdirSync(tmp);
  try {
    await fill(tmp);
    writeFileSync(join(tmp, STATE), JSON.stringify(state, null, 2) + "\n");
    const files = Object.fromEntries(listFiles(tmp).map((f) => [relative(tmp, f), sha256(f)]));
    writeFileSync(join(tmp, MANIFEST), JSON.stringify({ step, files }, null, 2) + "\n");
  } catch (e) {
    rmSync(tmp, { recursive: true, force: true });
    throw e;
  }
  const final = join(root, `step-${step}`);
  rmSync(final, { recursive: true, force: true });
  renameSync(tmp, final);
  for (const old of listCheckpoints(runDir).slice(keep)) rmSync(join(root, `step-${old}`), { recursive: true, force: true });
  return final;
}

/** Why a checkpoint directory fails verification, or undefined when every file matches its checksum. */
export function verifyCheckpoint(dir: string): string | undefined {
  const manifestPath = join(dir, MANIFEST);
  if (!existsSync(manifestPath)) return "no manifest (the write did not finish)";
  let files: Record<string, string>;
  try {
    files = JSON.parse(readFileSync(manifestPath, "utf8")).files;
  } catch {
    return "manifest is not valid JSON";
  }
  for (const [rel, sum] of Object.entries(files)) {
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
  const skipped: { step: number; reason: string }[] = [];
  for (const step of listCheckpoints(runDir)) {
    const dir = join(checkpointsDir(runDir), `step-${step}`);
    const bad = verifyCheckpoint(dir);
    if (bad) {
      skipped.push({ step, reason: bad });
      continue;
    }
    return { dir, step, state: JSON.parse(readFileSync(join(dir, STATE), "utf8")) as S, skipped };
  }
  return undefined;
}
