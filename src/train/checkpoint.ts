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
import {
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { basename, join } from "node:path";
import { z } from "zod";
import { AgentR1Error } from "../util/errors.js";
import { makeDir } from "../util/make-dir.js";

export const MANIFEST = "manifest.json";
export const STATE = "state.json";

/**
 * Every entry under `dir`, relative, with '/' separators: regular files in `files`, anything that
 * is neither a file nor a directory (a symlink, a FIFO, a socket) in `other`. Never follows a link.
 */
function walk(
  dir: string,
  prefix = "",
  acc: { files: string[]; other: string[] } = { files: [], other: [] },
): { files: string[]; other: string[] } {
  for (const name of readdirSync(dir).sort()) {
    const rel = prefix ? `${prefix}/${name}` : name;
    const st = lstatSync(join(dir, name));
    if (st.isDirectory()) walk(join(dir, name), rel, acc);
    else if (st.isFile()) acc.files.push(rel);
    else acc.other.push(rel);
  }
  return acc;
}

function sha256(file: string): string {
  return createHash("sha256").update(readFileSync(file)).digest("hex");
}

/** Writing a checkpoint failed; the message names the checkpoint, the cause, and the newest checkpoint left. */
export class CheckpointError extends AgentR1Error {
  constructor(
    message: string,
    hint?: string,
    override readonly cause?: unknown,
  ) {
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
export async function writeCheckpoint<S extends object>(
  runDir: string,
  step: number,
  state: S,
  fill: (dir: string) => Promise<void>,
  keep: number,
): Promise<string> {
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
    const left = older.length
      ? `the newest earlier checkpoint, ${join(root, `step-${older[0]}`)}, is untouched`
      : "there is no earlier checkpoint";
    const why = e instanceof Error ? e.message : String(e);
    return new CheckpointError(
      `${final}: writing the checkpoint failed: ${why}; ${left}`,
      "fix the cause (disk space, permissions), then continue the run with --resume",
      e,
    );
  };
  try {
    makeDir(root);
    rmSync(tmp, { recursive: true, force: true });
    mkdirSync(tmp);
    await fill(tmp);
    writeFileSync(join(tmp, STATE), JSON.stringify(state, null, 2) + "\n");
    const files = Object.fromEntries(walk(tmp).files.map((rel) => [rel, sha256(join(tmp, rel))]));
    writeFileSync(join(tmp, MANIFEST), JSON.stringify({ step, files }, null, 2) + "\n");
    rmSync(final, { recursive: true, force: true });
    renameSync(tmp, final);
  } catch (e) {
    throw failed(e);
  }
  // Only older steps are pruned: a newer step-M (one that failed verification when this run resumed) is left for its own write to replace.
  const older = listCheckpoints(runDir).filter((s) => s < step);
  for (const old of older.slice(Math.max(0, keep - 1)))
    rmSync(join(root, `step-${old}`), { recursive: true, force: true });
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

const manifestSchema = z.object({
  step: z.number().int().nonnegative(),
  files: z.record(z.string(), z.string().regex(/^[0-9a-f]{64}$/, "expected a SHA-256 hex digest")),
});

/** A listed path is usable only when it is relative, normalized, and stays inside the checkpoint. */
function badPath(rel: string): string | undefined {
  const parts = rel.split("/");
  if (rel === "" || rel.startsWith("/") || rel.includes("\\") || parts.some((p) => p === "" || p === "." || p === ".."))
    return `lists '${rel}', which is not a plain relative path inside the checkpoint`;
  return undefined;
}

/**
 * Why a checkpoint directory fails verification, or undefined when it is sound: the manifest
 * parses, names exactly the regular files of the checkpoint (relative paths inside it, state.json
 * among them), every one matches its checksum, and there is nothing else (no unlisted file, no
 * symlink, FIFO or socket). Files are only opened once they are known to be regular files.
 */
export function verifyCheckpoint(dir: string): string | undefined {
  const manifestPath = join(dir, MANIFEST);
  const mst = lstatSync(manifestPath, { throwIfNoEntry: false });
  if (!mst) return "no manifest (the write did not finish)";
  if (!mst.isFile()) return `${MANIFEST} is not a regular file`;
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(manifestPath, "utf8"));
  } catch {
    return `${MANIFEST} is not valid JSON`;
  }
  const parsed = manifestSchema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    return `${MANIFEST}: ${issue.path.map(String).join(".") || "(top)"}: ${issue.message}`;
  }
  const named = /^step-(\d+)$/.exec(basename(dir));
  if (named && Number(named[1]) !== parsed.data.step)
    return `${MANIFEST} is for step ${parsed.data.step}, not ${named[1]}`;
  const sums = parsed.data.files;
  const listed = Object.keys(sums);
  if (!Object.hasOwn(sums, STATE)) return `${MANIFEST} does not list ${STATE}`;
  for (const rel of listed) {
    const bad = badPath(rel);
    if (bad) return `${MANIFEST} ${bad}`;
  }
  const found = walk(dir);
  if (found.other.length > 0) return `${found.other[0]} is not a regular file (a link, FIFO or device)`;
  const onDisk = new Set(found.files.filter((f) => f !== MANIFEST));
  for (const rel of listed) {
    if (!onDisk.has(rel))
      return lstatSync(join(dir, rel), { throwIfNoEntry: false })
        ? `${rel} is not a regular file`
        : `${rel} is missing`;
  }
  const unlisted = [...onDisk].find((f) => !Object.hasOwn(sums, f));
  if (unlisted) return `${unlisted} is in the checkpoint but not in ${MANIFEST}`;
  for (const rel of listed) if (sha256(join(dir, rel)) !== sums[rel]) return `${rel} does not match its checksum`;
  return undefined;
}

export interface FoundCheckpoint<S> {
  dir: string;
  step: number;
  state: S;
  /** Newer checkpoints that failed verification, with the reason. */
  skipped: { step: number; reason: string }[];
}

/** Checks a checkpoint's state.json against what it must hold; returns the state, or why it is unusable. */
export type StateParser<S> = (raw: unknown, step: number) => { state: S } | { error: string };

/** Accepts any JSON object (for tests and tools that do not know the state's shape). */
const anyObject = <S>(raw: unknown): { state: S } | { error: string } =>
  raw !== null && typeof raw === "object" && !Array.isArray(raw)
    ? { state: raw as S }
    : { error: `${STATE} is not a JSON object` };

/** The newest checkpoint that verifies, or undefined when there is none. */
export function latestCheckpoint<S>(
  runDir: string,
  parseState: StateParser<S> = anyObject,
): FoundCheckpoint<S> | undefined {
  return scanCheckpoints<S>(runDir, parseState).found;
}

/** The newest checkpoint that verifies and whose state parses (if any), and the newer ones that did not, with the reason. */
export function scanCheckpoints<S>(
  runDir: string,
  parseState: StateParser<S> = anyObject,
): { found?: FoundCheckpoint<S>; skipped: { step: number; reason: string }[] } {
  const skipped: { step: number; reason: string }[] = [];
  for (const step of listCheckpoints(runDir)) {
    const dir = join(checkpointsDir(runDir), `step-${step}`);
    const reason = verifyCheckpoint(dir) ?? stateProblem(dir, step, parseState);
    if (typeof reason === "string") {
      skipped.push({ step, reason });
      continue;
    }
    return { found: { dir, step, state: reason.state, skipped }, skipped };
  }
  return { skipped };
}

function stateProblem<S>(dir: string, step: number, parseState: StateParser<S>): string | { state: S } {
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(join(dir, STATE), "utf8"));
  } catch {
    return `${STATE} is not valid JSON`;
  }
  const res = parseState(raw, step);
  return "error" in res ? res.error : res;
}
