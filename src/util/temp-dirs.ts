/**
 * Temporary directories this process made for itself (the weights an `engine.sampler` reads), and
 * their removal however the process ends: their owner removes one when done with it
 * (`removeTempDir`), and whatever is left goes at exit, on an error that ends the process, and on
 * SIGINT or SIGTERM. Only directories made here are ever removed, never one a user named.
 *
 * The signal hooks are installed only while a directory is registered. On a signal, when no other
 * code listens for it, the directories are removed and the signal is raised again with its default
 * action, so the process still ends as killed by it (exit status 130 for SIGINT, 143 for SIGTERM).
 * When other code listens (`serve`, `dashboard` close gracefully on SIGINT), the signal is theirs:
 * the directories are removed at exit instead. SIGKILL cannot be caught: after one, the
 * directories stay.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const live = new Set<string>();
// Not SIGHUP: under nohup it is ignored, and a listener here would turn it back into a kill.
const SIGNALS: NodeJS.Signals[] = ["SIGINT", "SIGTERM"];
let hooked = false;

/** A new directory `TMPDIR/PREFIXxxxxxx`, removed at the latest when the process ends. */
export function makeTempDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  live.add(dir);
  hook();
  return dir;
}

/** Removes a directory `makeTempDir` made (anything else is left alone). */
export function removeTempDir(dir: string): void {
  if (!live.delete(dir)) return;
  rmSync(dir, { recursive: true, force: true });
  if (live.size === 0) unhook();
}

/** The directories made and not yet removed. */
export function liveTempDirs(): string[] {
  return [...live];
}

function removeAll(): void {
  for (const dir of live) {
    try {
      rmSync(dir, { recursive: true, force: true });
    } catch {
      // the process is ending: nothing better to do with the error
    }
  }
  live.clear();
}

function onSignal(signal: NodeJS.Signals): void {
  if (process.listenerCount(signal) > 1) return; // someone else handles it; 'exit' cleans up
  removeAll();
  unhook();
  process.kill(process.pid, signal); // no listener left: the default action, death by the signal
}

function hook(): void {
  if (hooked) return;
  hooked = true;
  process.on("exit", removeAll);
  for (const s of SIGNALS) process.on(s, onSignal);
}

function unhook(): void {
  if (!hooked) return;
  hooked = false;
  process.off("exit", removeAll);
  for (const s of SIGNALS) process.off(s, onSignal);
}
