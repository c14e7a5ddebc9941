/**
 * Running benchmark processes, the PyTorch reference (bench/torch_engine.py) among them: the
 * package root, finding a python3 that imports a module, and running one process with its output
 * relayed to stderr. Shared by bench/run-all.ts and bench/engine.ts; the pure parts (reading the
 * output, ratios) are in bench/suite-lib.ts.
 */
import { spawn, spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import type { RunOutcome } from "./suite-lib.js";

/** The package root: this file runs as dist/bench/torch-ref.js (or bench/torch-ref.ts under tsx). */
export const ROOT = (() => {
  let d = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 4 && !existsSync(join(d, "package.json")); i++) d = dirname(d);
  return d;
})();

/** The PyTorch reference, relative to ROOT (processes run with cwd ROOT). */
export const TORCH_SCRIPT = join("bench", "torch_engine.py");

/** Why there is no PyTorch figure when no python3 imports torch. */
export const NO_TORCH_REASON = "no python3 imports torch (apt-get install python3-torch)";

const log = (s: string) => process.stderr.write(`[bench] ${s}\n`);

/** A python3 that imports `module`: `explicit` if given, else $AGENT_R1_TORCH_PYTHON, python3 on PATH, /usr/bin/python3. */
export function findPython(module: string, explicit?: string): string | undefined {
  const candidates = explicit
    ? [explicit]
    : [process.env.AGENT_R1_TORCH_PYTHON, "python3", "/usr/bin/python3"].filter((x): x is string => !!x);
  for (const py of [...new Set(candidates)]) {
    const r = spawnSync(py, ["-c", `import ${module}`], { stdio: "ignore", timeout: 120_000 });
    if (r.status === 0) return py;
  }
  return undefined;
}

/** Runs one benchmark process (cwd ROOT); its output is passed on to stderr, prefixed, as it comes. */
export function runProcess(
  name: string,
  cmd: string,
  argv: string[],
  timeoutMinutes: number,
  env: NodeJS.ProcessEnv = process.env,
): Promise<RunOutcome> {
  const command = [cmd === process.execPath ? "node" : cmd, ...argv].join(" ");
  log(`${name}: ${command}`);
  const t0 = performance.now();
  return new Promise((done) => {
    const child = spawn(cmd, argv, { cwd: ROOT, env, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "",
      stderr = "",
      timedOut = false;
    const relay = (buf: Buffer, keep: (s: string) => void) => {
      const s = buf.toString("utf8");
      keep(s);
      process.stderr.write(s.replace(/^(?=.)/gm, `  ${name} | `));
    };
    child.stdout.on("data", (b: Buffer) => relay(b, (s) => (stdout += s)));
    child.stderr.on("data", (b: Buffer) => relay(b, (s) => (stderr = (stderr + s).slice(-200_000))));
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill("SIGKILL");
    }, timeoutMinutes * 60_000);
    const finish = (code: number | null, signal: string | null) => {
      clearTimeout(timer);
      const seconds = (performance.now() - t0) / 1000;
      log(
        `${name}: ${timedOut ? "timed out" : signal ? `killed by ${signal}` : `exit ${code}`} after ${seconds.toFixed(0)} s`,
      );
      done({
        command,
        stdout,
        stderr,
        code,
        signal,
        seconds,
        ...(timedOut ? { timedOutMinutes: timeoutMinutes } : {}),
      });
    };
    child.on("error", (e) => {
      stderr += `\nError: ${e.message}`;
      finish(127, null);
    });
    child.on("close", finish);
  });
}
