/**
 * `mkdir -p` with a bound: each missing component is created once, from the nearest existing
 * ancestor down, and any failure is one line naming the path. Node 20's own recursive mkdir
 * retries forever where the kernel answers ENOENT for a parent that exists (under /proc or /sys,
 * for instance), spinning a core; this walks at most as many steps as the path has components.
 */
import { mkdirSync, statSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { InputError } from "./errors.js";

/** Creates `path` and its missing parents; `what` names it in errors ("--out", "--state-dir"). */
export function makeDir(path: string, what = path): void {
  const target = resolve(path);
  const missing: string[] = [];
  let at = target;
  for (;;) {
    const st = statSync(at, { throwIfNoEntry: false });
    if (st) {
      if (!st.isDirectory())
        throw new InputError(`${what}: ${at} is not a directory, so ${target} cannot be created in it`);
      break;
    }
    missing.push(at);
    const up = dirname(at);
    if (up === at) break;
    at = up;
  }
  for (const dir of missing.reverse()) {
    try {
      mkdirSync(dir);
    } catch (e) {
      const err = e as NodeJS.ErrnoException;
      if (err.code === "EEXIST" && statSync(dir, { throwIfNoEntry: false })?.isDirectory()) continue;
      throw new InputError(
        `${what}: cannot create the directory ${dir} (${err.code ?? err.message})`,
        err.code === "ENOENT" ? "its parent does not take new directories (a /proc or /sys path?)" : undefined,
      );
    }
  }
}
