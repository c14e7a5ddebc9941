/** Shared test helpers: temp dirs, an in-memory CLI io, and the path of the CLI entry. */
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { CommandIO } from "../src/cli/command.js";

export function tempDir(prefix = "agent-r1-"): string {
  return mkdtempSync(join(tmpdir(), prefix));
}

export function captureIO(stdin = ""): CommandIO & { stdout: string[]; stderr: string[] } {
  const stdout: string[] = [],
    stderr: string[] = [];
  return { stdout, stderr, out: (l) => stdout.push(l), err: (l) => stderr.push(l), readStdin: async () => stdin };
}

/** The CLI entry next to this test: compiled .js under dist/, .ts under tsx. */
export function cliEntry(): string {
  const js = fileURLToPath(new URL("../src/cli/main.js", import.meta.url));
  return existsSync(js) ? js : js.replace(/\.js$/, ".ts");
}

/** `agent-r1 serve` as a child process (one in-process replica): its first stdout line, its stderr so far, and its exit code. */
export async function startServeChild(
  modelDir: string,
): Promise<{ line: string; child: ChildProcess; stderr: () => string; exited: Promise<number | null> }> {
  const child = spawn(
    process.execPath,
    [...process.execArgv, cliEntry(), "serve", "--model", modelDir, "--port", "0"],
    {
      env: { ...process.env, AGENT_R1_WORKERS: "0" },
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  let stderr = "";
  child.stderr!.on("data", (d) => (stderr += d));
  const exited = new Promise<number | null>((r) => child.on("exit", (code) => r(code)));
  const line = await new Promise<string>((resolve, reject) => {
    let out = "";
    child.stdout!.on("data", (d) => {
      out += d;
      const nl = out.indexOf("\n");
      if (nl >= 0) resolve(out.slice(0, nl));
    });
    void exited.then((code) => reject(new Error(`serve exited ${code} before listening: ${stderr}`)));
  });
  return { line, child, stderr: () => stderr, exited };
}
