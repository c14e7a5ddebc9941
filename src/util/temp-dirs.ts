/**
 * Temporary directories this process made for itself (the weights an `engine.sampler` reads), and
 * their removal however the process ends: their owner removes one when done with it
 * (`removeTempDir`), and whatever is left goes at exit, on an error that ends the process, and on
 * SIGINT or SIGTERM (./exit-hooks.ts: a signal other code listens for is left to it, and the
 * directories go at exit then). Only directories made here are ever removed, never one a user
 * named. SIGKILL cannot be caught: after one, the directories stay.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { onProcessEnd } from "./exit-hooks.js";

const live = new Set<string>();
let release: (() => void) | undefined;

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

function hook(): void {
  release ??= onProcessEnd(removeAll);
}

function unhook(): void {
  release?.();
  release = undefined;
}
