/**
 * Benchmark suite: runs the engine, rollout and main-job benchmarks, each as its own
 * process, keeps each one's last JSON line (and its other JSON lines), and writes
 * bench/results.json with the machine (cpu, cores, node, date, git commit). With the engine it
 * runs, in the same run, the same shapes in PyTorch (bench/torch_engine.py, when a python3 that
 * imports torch is found: Debian's python3-torch) and a float32 matmul for the machine's peak
 * GFLOPS, and reports ours/PyTorch ratios and achieved GFLOPS against the peak. Ends by printing
 * a markdown table for docs/benchmarks.md on stdout (children's output goes to stderr as it comes). The
 * engine benchmark runs with --no-torch, since PyTorch runs here as its own entry.
 *
 *   npm run bench [-- --only engine,rollout,demo] [-- --quick] [-- --no-torch] [-- --python PATH]
 *     [-- --out FILE] [-- --timeout-minutes N] [-- --engine-args "..."] [-- --rollout-args "..."]
 *     [-- --demo-args "..."] [-- --torch-args "..."]
 *
 * --only: groups to run; the others keep their entries from the existing results file.
 * --quick: smaller settings for a fast check (engine and PyTorch: shape S only; rollout: 8
 *   trajectories, one repeat; main job: 1-minute budget); written to a file in the temp directory
 *   unless --out is given, so a check never replaces the measured figures.
 * A benchmark that fails (the main job without a base checkpoint, say) is recorded as
 * {"skipped": "<its error line>"}; the suite exits non-zero only if the engine or rollout
 * benchmark failed.
 */
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync, writeFileSync, renameSync } from "node:fs";
import { cpus, availableParallelism, totalmem, tmpdir, platform, arch } from "node:os";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { parameterCount, parseModelConfig, presetConfigJson } from "../src/model/config.js";
import {
  assembleResults,
  entryFromRun,
  isRan,
  markdown,
  parseOnly,
  type BenchEntry,
  type Machine,
} from "./suite-lib.js";
import { findPython, NO_TORCH_REASON, ROOT, runProcess, TORCH_SCRIPT } from "./torch-ref.js";

const { values: args } = parseArgs({
  options: {
    only: { type: "string" },
    quick: { type: "boolean", default: false },
    "no-torch": { type: "boolean", default: false },
    python: { type: "string" },
    out: { type: "string" },
    "timeout-minutes": { type: "string" },
    "engine-args": { type: "string", default: "" },
    "rollout-args": { type: "string", default: "" },
    "demo-args": { type: "string", default: "" },
    "torch-args": { type: "string", default: "" },
  },
});

const split = (s: string) => s.split(/\s+/).filter(Boolean);
const log = (s: string) => process.stderr.write(`[bench] ${s}\n`);

function git(argv: string[]): string {
  try {
    return execFileSync("git", argv, { cwd: ROOT, encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim();
  } catch {
    return "";
  }
}

function machine(): Machine {
  return {
    cpu: cpus()[0]?.model.trim() ?? "unknown",
    cores: availableParallelism(),
    node: process.version,
    platform: `${platform()} ${arch()}`,
    total_mem_gb: Math.round(totalmem() / 2 ** 30),
    date: new Date().toISOString(),
    git_commit: git(["rev-parse", "HEAD"]) || "unknown",
    git_dirty: git(["status", "--porcelain", "--untracked-files=no"]) !== "",
  };
}

const PARAMS = {
  S: parameterCount(parseModelConfig(presetConfigJson("small", 512))),
  M: parameterCount(parseModelConfig(presetConfigJson("medium", 2048))),
};

async function main() {
  const only = parseOnly(args.only);
  const quick = args.quick!;
  const out = resolve(
    args.out ?? (quick ? join(tmpdir(), "agent-r1-bench-quick.json") : join(ROOT, "bench", "results.json")),
  );
  const timeout = (def: number) => (args["timeout-minutes"] !== undefined ? Number(args["timeout-minutes"]) : def);
  const m = machine();
  const meta = { date: m.date, commit: m.git_commit, quick };
  const node = (script: string, extra: string[]) => [join("dist", "bench", script), ...extra];
  const entries: Record<string, BenchEntry> = {};
  let torchPython: string | undefined;
  let failed = false;

  if (only.includes("engine")) {
    // --no-torch: PyTorch runs below as its own entry, not a second time inside the engine benchmark.
    const engineArgs = ["--no-torch", ...(quick ? ["--only", "S"] : []), ...split(args["engine-args"]!)];
    entries.engine = entryFromRun(
      await runProcess("engine", process.execPath, node("engine.js", engineArgs), timeout(90)),
      meta,
    );
    if (!isRan(entries.engine)) failed = true;

    const skip = (command: string, why: string): BenchEntry => ({
      command,
      date: m.date,
      commit: m.git_commit,
      skipped: why,
    });
    torchPython = args["no-torch"] ? undefined : findPython("torch", args.python);
    if (args["no-torch"]) {
      entries.torch_engine = skip(`python3 ${TORCH_SCRIPT}`, "--no-torch");
    } else if (!torchPython) {
      entries.torch_engine = skip(`python3 ${TORCH_SCRIPT}`, NO_TORCH_REASON);
    } else {
      const torchArgs = [TORCH_SCRIPT, ...(quick ? ["--only", "S", "--quick"] : []), ...split(args["torch-args"]!)];
      entries.torch_engine = entryFromRun(await runProcess("torch", torchPython, torchArgs, timeout(60)), meta);
    }
    const peakPython = torchPython ?? findPython("numpy", args.python);
    entries.peak = peakPython
      ? entryFromRun(await runProcess("peak", peakPython, [TORCH_SCRIPT, "--peak"], timeout(10)), meta)
      : skip(`python3 ${TORCH_SCRIPT} --peak`, "no python3 with torch or numpy");
  }
  if (only.includes("rollout")) {
    const rolloutArgs = [
      ...(quick ? ["--trajectories", "8", "--repeats", "1", "--probe-trajectories", "2"] : []),
      ...split(args["rollout-args"]!),
    ];
    entries.rollout = entryFromRun(
      await runProcess("rollout", process.execPath, node("rollout.js", rolloutArgs), timeout(60)),
      meta,
    );
    if (!isRan(entries.rollout)) failed = true;
  }
  if (only.includes("demo")) {
    const demoArgs = [...(quick ? ["--budget-minutes", "1"] : []), ...split(args["demo-args"]!)];
    entries.demo = entryFromRun(
      await runProcess("demo", process.execPath, node("demo.js", demoArgs), timeout(60)),
      meta,
    );
  }

  let previous: unknown;
  if (existsSync(out)) {
    try {
      previous = JSON.parse(readFileSync(out, "utf8"));
    } catch {
      log(`${out} is not valid JSON; starting it afresh`);
    }
  }
  const results = assembleResults({
    machine: m,
    run: { only, quick, ...(torchPython ? { torch_python: torchPython } : {}) },
    entries,
    params: PARAMS,
    previous,
  });
  writeFileSync(out + ".tmp", JSON.stringify(results, null, 2) + "\n");
  renameSync(out + ".tmp", out);
  log(`wrote ${out}`);

  const ratios = results.comparison.ratios;
  if (ratios) log(`ours / PyTorch: train ${JSON.stringify(ratios.train)}, sample ${JSON.stringify(ratios.sample)}`);
  for (const [name, e] of Object.entries(results.benchmarks)) if (e && !isRan(e)) log(`${name} skipped: ${e.skipped}`);
  process.stdout.write(markdown(results));
  process.exitCode = failed ? 1 : 0;
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
