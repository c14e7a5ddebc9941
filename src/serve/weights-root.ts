/**
 * `serve --weights-from DIR`: the one directory whose contents clients may make the server read
 * (SGLang's /update_weights_from_disk, the LoRA routes). A path is taken inside it or not at all:
 * resolved from DIR, links followed, and refused when it ends up outside.
 */
import { realpathSync } from "node:fs";
import { isAbsolute, relative, resolve } from "node:path";

/** Where a path a client named lies: its real path inside the root, outside it, or nowhere. */
export type RootedPath = { real: string } | { problem: "outside" | "missing" };

const within = (base: string, path: string) => {
  const rel = relative(base, path);
  return rel === "" || (!rel.startsWith("..") && !isAbsolute(rel));
};

/** `path` (relative paths from `root`) resolved with its links followed, when it lies inside `root`. */
export function underRoot(root: string, path: string): RootedPath {
  let base: string;
  try {
    base = realpathSync(root);
  } catch {
    return { problem: "missing" };
  }
  const target = resolve(base, path);
  if (!within(base, target) && !within(resolve(root), target)) return { problem: "outside" };
  let real: string;
  try {
    real = realpathSync(target);
  } catch {
    return { problem: "missing" };
  }
  return within(base, real) ? { real } : { problem: "outside" };
}
