/** Shared test helpers: temp dirs, an in-memory CLI io, and the path of the CLI entry. */
import { existsSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { CommandIO } from "../src/cli/command.js";

export function tempDir(prefix = "agent-r1-"): string {
  return mkdtempSync(join(tmpdir(), prefix));
}

export function captureIO(stdin = ""): CommandIO & { stdout: string[]; stderr: string[] } {
  const stdout: string[] = [], stderr: string[] = [];
  return { stdout, stderr, out: (l) => stdout.push(l), err: (l) => stderr.push(l), readStdin: async () => stdin };
}

/** The CLI entry next to this test: compiled .js under dist/, .ts under tsx. */
export function cliEntry(): string {
  const js = fileURLToPath(new URL("../src/cli/main.js", import.meta.url));
  return existsSync(js) ? js : js.replace(/\.js$/, ".ts");
}
