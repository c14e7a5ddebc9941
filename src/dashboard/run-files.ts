/**
 * The files of a run directory the dashboard may read: regular files whose real path (every
 * symlink resolved) lies inside the run directory. Anything else, a link out of the run (a
 * `samples/iter-7.jsonl` pointing at ~/.ssh/id_rsa), a directory, a device, counts as absent,
 * so the dashboard serves only what the run itself holds.
 */
import { closeSync, constants, openSync, readFileSync, realpathSync, statSync } from "node:fs";
import { sep } from "node:path";

/** Errors that mean "no such file here" (missing, a path through a non-directory, a symlink loop). */
const ABSENT = new Set(["ENOENT", "ENOTDIR", "ELOOP"]);

/** The real path of `path` when it is a regular file inside `runDir`, else undefined. */
export function runFile(runDir: string, path: string): string | undefined {
  let root: string, real: string;
  try {
    root = realpathSync(runDir);
    real = realpathSync(path);
  } catch (e) {
    if (ABSENT.has((e as NodeJS.ErrnoException).code ?? "")) return undefined;
    throw e;
  }
  const prefix = root.endsWith(sep) ? root : root + sep;
  if (!real.startsWith(prefix)) return undefined;
  return statSync(real).isFile() ? real : undefined;
}

/**
 * Opens what runFile found without following a link put in its place since (O_NOFOLLOW on the
 * real path); undefined when it is absent or outside.
 */
export function openRunFile(runDir: string, path: string): number | undefined {
  const real = runFile(runDir, path);
  if (real === undefined) return undefined;
  try {
    return openSync(real, constants.O_RDONLY | constants.O_NOFOLLOW);
  } catch (e) {
    if (ABSENT.has((e as NodeJS.ErrnoException).code ?? "")) return undefined;
    throw e;
  }
}

/** The text of a run file, or undefined when it is absent or outside the run. */
export function readRunFile(runDir: string, path: string): string | undefined {
  const fd = openRunFile(runDir, path);
  if (fd === undefined) return undefined;
  try {
    return readFileSync(fd, "utf8");
  } finally {
    closeSync(fd);
  }
}
