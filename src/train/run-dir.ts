/**
 * Whether a new run may start in `--out` (the rule of src/util/out-path.ts, with the words of a
 * run): a missing or empty directory, yes; a run directory of ours, only with --resume (continue)
 * or --force (start over); any other non-empty directory, only with --force. --force replaces
 * what is there; it never reaches a directory the run reads from, nor the working directory.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { checkOutDir, type OutCheck } from "../util/out-path.js";
import { checkpointsDir, listCheckpoints, MANIFEST } from "./checkpoint.js";
import { InputError } from "../util/errors.js";

/** Entries a run writes at its top level. */
export const RUN_ENTRIES = ["config.yaml", "metrics.jsonl", "samples", "checkpoints", "base-model", "eval.json"];

/** True when `dir` looks like a run directory of ours: a config next to metrics or a checkpoint with our manifest. */
export function isRunDir(dir: string): boolean {
  if (!existsSync(join(dir, "config.yaml"))) return false;
  return (
    existsSync(join(dir, "metrics.jsonl")) ||
    listCheckpoints(dir).some((s) => existsSync(join(checkpointsDir(dir), `step-${s}`, MANIFEST)))
  );
}

/**
 * Checks `out` for a new run; returns true when it must be emptied first (--force over a
 * non-empty directory). Throws a one-line InputError when the run may not start there.
 */
export function checkNewRunDir(
  out: string,
  o: { command?: string; force?: boolean; inputs?: OutCheck["inputs"] },
): boolean {
  if (!o.force && existsSync(out) && isRunDir(out)) {
    throw new InputError(
      `${out} already holds a run`,
      "continue it with --resume, start it over with --force, or pick a new --out",
    );
  }
  const notEmpty = (listing: string) =>
    new InputError(
      `${out} is not empty and is not a run directory (${listing})`,
      "pick a new --out, or pass --force to replace the directory and everything in it",
    );
  return checkOutDir(out, { command: o.command ?? "train", force: o.force, inputs: o.inputs, notEmpty }) === "replace";
}
