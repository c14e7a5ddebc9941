/**
 * Reading an input file with errors in words: a directory where a file belongs, a path through
 * a file, a missing file or a permission problem each become one line naming the path (Node's
 * own messages, such as a bare "EISDIR: illegal operation on a directory, read", name neither).
 */
import { readFileSync, statSync } from "node:fs";

/** Why `path` cannot be read as a file, in words; undefined when it looks readable. */
export function fileProblem(path: string): string | undefined {
  try {
    if (statSync(path).isDirectory()) return "is a directory, not a file";
    return undefined;
  } catch (e) {
    return fsErrorWords(e);
  }
}

/** A Node file-system error as a few words (no path: the caller puts it in front). */
export function fsErrorWords(e: unknown): string {
  const code = (e as NodeJS.ErrnoException)?.code;
  switch (code) {
    case "ENOENT":
      return "file not found";
    case "ENOTDIR":
      return "a part of the path is a file, not a directory";
    case "EISDIR":
      return "is a directory, not a file";
    case "EACCES":
    case "EPERM":
      return "permission denied";
    default:
      return `cannot read (${code ?? (e instanceof Error ? e.message : String(e))})`;
  }
}

/** The file's text; `fail(words)` makes the error to throw (it names the file). */
export function readTextInput(path: string, fail: (words: string) => Error): string {
  return readInput(path, fail).toString("utf8");
}

/** The file's bytes; `fail(words)` makes the error to throw (it names the file). */
export function readInput(path: string, fail: (words: string) => Error): Buffer {
  const problem = fileProblem(path);
  if (problem) throw fail(problem);
  try {
    return readFileSync(path);
  } catch (e) {
    throw fail(fsErrorWords(e));
  }
}
