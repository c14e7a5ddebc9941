/**
 * Where a command may write. The rule for every command that writes (`--out`):
 * it never deletes or overwrites what it did not create unless the user passes
 * `--force`, and some targets are refused even then:
 *  - a path that is, contains, or lies inside something the command reads
 *    (exporting a checkpoint into its own run directory would delete the run);
 *  - the current directory or one of its parents, when not empty (replacing it
 *    would delete the user's files, and a directory in use cannot be renamed).
 * A missing or empty directory is always fine. Checks run before any work, so a
 * refused command has written nothing.
 */
import { existsSync, lstatSync, readdirSync, realpathSync, rmSync, statSync } from "node:fs";
import { basename, dirname, join, resolve, sep } from "node:path";
import { InputError } from "./errors.js";

export interface OutCheck {
  /** The command, for messages: "export". */
  command: string;
  /** The flag naming the path, for messages. Default "--out". */
  flag?: string;
  /** The user passed --force: a non-empty directory (or an existing file) may be replaced. */
  force?: boolean;
  /** What the command reads, labelled: the output must not overlap any of them. */
  inputs?: { label: string; path: string | undefined }[];
  /** The error for a non-empty directory without --force, given a short listing of it. Default: "DIR is not empty (...)". */
  notEmpty?: (listing: string) => InputError;
}

/** What is at an output path now. */
export type OutState = "absent" | "empty" | "replace";

/** The absolute path with symlinks of its existing part resolved, so two spellings of one place compare equal. */
export function canonicalPath(path: string): string {
  const abs = resolve(path);
  if (existsSync(abs)) return realpathSync(abs);
  const parent = dirname(abs);
  return parent === abs ? abs : join(canonicalPath(parent), basename(abs));
}

/** True when one path is the other or lies inside it. */
export function overlaps(a: string, b: string): boolean {
  const inside = (x: string, y: string) => x === y || x.startsWith(y.endsWith(sep) ? y : y + sep);
  return inside(a, b) || inside(b, a);
}

function entriesOf(dir: string): string[] {
  return readdirSync(dir).sort();
}

function listing(entries: string[]): string {
  const shown = entries.slice(0, 3).join(", ");
  return entries.length > 3 ? `${shown}, ... (${entries.length} entries)` : shown;
}

/** Checks that `out` is inside nothing this command reads and is not the working directory (or a parent of it, when non-empty). */
function checkPlace(out: string, o: OutCheck): string {
  const flag = o.flag ?? "--out";
  const target = canonicalPath(out);
  for (const input of o.inputs ?? []) {
    if (input.path === undefined || input.path === "") continue;
    const src = canonicalPath(input.path);
    if (overlaps(target, src)) {
      const how = target === src ? "is" : target.startsWith(src + sep) ? "lies inside" : "contains";
      throw new InputError(
        `${o.command}: ${flag} ${out} ${how} the ${input.label} it reads (${input.path}); writing there would destroy it`,
        `pick a ${flag} outside ${input.path}`,
      );
    }
  }
  return target;
}

/**
 * Decides whether a directory output may be written: "absent" (it will be created), "empty", or
 * "replace" (non-empty, and --force given). Throws a one-line InputError otherwise.
 */
export function checkOutDir(out: string, o: OutCheck): OutState {
  const flag = o.flag ?? "--out";
  const target = checkPlace(out, o);
  if (!existsSync(out)) {
    if (lstatSync(dirname(resolve(out)), { throwIfNoEntry: false })?.isFile()) {
      throw new InputError(`${o.command}: ${flag} ${out}: ${dirname(out)} is a file, not a directory`);
    }
    return "absent";
  }
  if (!statSync(out).isDirectory())
    throw new InputError(`${o.command}: ${flag} ${out} is a file; the output is a directory`, `pick a new ${flag}`);
  const entries = entriesOf(out);
  if (entries.length === 0) return "empty";
  const cwd = canonicalPath(process.cwd());
  if (target === cwd || cwd.startsWith(target.endsWith(sep) ? target : target + sep)) {
    throw new InputError(
      `${o.command}: ${flag} ${out} is ${target === cwd ? "the current directory" : "a parent of the current directory"} and is not empty; it is never replaced`,
      `pick a new, empty ${flag}`,
    );
  }
  if (!o.force) {
    throw (
      o.notEmpty?.(listing(entries)) ??
      new InputError(
        `${o.command}: ${flag} ${out} is not empty (${listing(entries)})`,
        `pick a new ${flag}, or pass --force to replace the directory and everything in it`,
      )
    );
  }
  return "replace";
}

/** Decides whether a file output may be written: a missing file always, an existing one only with --force. */
export function checkOutFile(out: string, o: OutCheck): "absent" | "replace" {
  const flag = o.flag ?? "--out";
  checkPlace(out, o);
  const st = lstatSync(out, { throwIfNoEntry: false });
  if (!st) {
    const parent = lstatSync(dirname(resolve(out)), { throwIfNoEntry: false });
    if (parent && !parent.isDirectory())
      throw new InputError(`${o.command}: ${flag} ${out}: ${dirname(out)} is not a directory`);
    return "absent";
  }
  if (st.isDirectory())
    throw new InputError(
      `${o.command}: ${flag} ${out} is a directory; the output is a file`,
      `give a file path for ${flag}`,
    );
  if (!st.isFile())
    throw new InputError(`${o.command}: ${flag} ${out} exists and is not a regular file`, `pick a new ${flag}`);
  if (!o.force)
    throw new InputError(
      `${o.command}: ${flag} ${out} already exists`,
      `pick a new ${flag}, or pass --force to replace it`,
    );
  return "replace";
}

/** Deletes what a directory holds (after checkOutDir said "replace"), keeping the directory itself. */
export function clearDirectory(dir: string): void {
  for (const name of readdirSync(dir)) rmSync(join(dir, name), { recursive: true, force: true });
}
