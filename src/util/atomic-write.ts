/**
 * Writing files and whole directories so that a failure never leaves half of one.
 *
 * A directory: everything goes to a sibling DIR.tmp-PID first. A missing DIR is then created by one rename; an existing empty
 * one (the current directory, say) receives the entries one by one; a non-empty one is
 * replaced whole (renamed away, then deleted). Callers that must not replace what they did not
 * create check the target first (out-path.ts). A failure removes the temporary directory and
 * becomes one line naming DIR.
 */
import { lstatSync, readdirSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { AgentR1Error } from "./errors.js";
import { makeDir } from "./make-dir.js";

export function writeDirectory(dir: string, fill: (tmp: string) => void): void {
  const target = resolve(dir);
  const tmp = `${target}.tmp-${process.pid}`;
  rmSync(tmp, { recursive: true, force: true });
  try {
    makeDir(tmp, dir);
    fill(tmp);
    place(tmp, target);
  } catch (e) {
    rmSync(tmp, { recursive: true, force: true });
    const err = e as NodeJS.ErrnoException;
    if (err.code && err.syscall)
      throw new AgentR1Error(
        `${dir}: cannot write the directory: ${err.message}`,
        "check the path, the permissions and the free disk space",
      );
    throw e;
  }
}

function place(tmp: string, target: string): void {
  const existing = lstatSync(target, { throwIfNoEntry: false });
  if (!existing) return renameSync(tmp, target);
  if (!existing.isDirectory()) throw new AgentR1Error(`${target}: exists and is not a directory`);
  if (readdirSync(target).length === 0) {
    for (const name of readdirSync(tmp)) renameSync(join(tmp, name), join(target, name));
    rmSync(tmp, { recursive: true, force: true });
    return;
  }
  const old = `${target}.old-${process.pid}`;
  renameSync(target, old);
  renameSync(tmp, target);
  rmSync(old, { recursive: true, force: true });
}

/** Writes a file through FILE.tmp-PID and a rename (creating its directory); a failure removes the temporary file. */
export function writeFileAtomic(path: string, data: string | Uint8Array): void {
  const tmp = `${path}.tmp-${process.pid}`;
  try {
    makeDir(dirname(resolve(path)), path);
    writeFileSync(tmp, data);
    renameSync(tmp, path);
  } catch (e) {
    rmSync(tmp, { force: true });
    const err = e as NodeJS.ErrnoException;
    if (err.code && err.syscall)
      throw new AgentR1Error(
        `${path}: cannot write the file: ${err.message}`,
        "check the path, the permissions and the free disk space",
      );
    throw e;
  }
}
