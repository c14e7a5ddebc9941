import { test } from "node:test";
import assert from "node:assert/strict";
import {
  assembleResults,
  compare,
  entryFromRun,
  errorReason,
  isRan,
  jsonLines,
  lastJsonLine,
  markdown,
  parseOnly,
  ratioMap,
  torchRatio,
  torchRatioFromRun,
  type BenchEntry,
  type Machine,
} from "../bench/suite-lib.js";

const machine: Machine = {
  cpu: "Test CPU",
  cores: 2,
  node: "v20.0.0",
  platform: "linux x64",
  total_mem_gb: 8,
  date: "2025-01-02T03:04:05.000Z",
  git_commit: "0123456789abcdef",
  git_dirty: false,
};
const meta = { date: machine.date, commit: machine.git_commit };
const PARAMS = { S: 1_000_000, M: 10_000_000 };

const ran = (command: string, stdout: string): BenchEntry =>
  entryFromRun({ command, stdout, stderr: "", code: 0, seconds: 12.34 }, meta);
const engineOut = [
  "loading model…",
  '{"workload":"train_S","tokens_per_s":700,"gflops":4.2}',
  "\u001b[2K progress 50%\r progress 100%",
  '{"train_tokens_per_s":{"S":700,"M":250},"sample_tokens_per_s":{"S_b32":2000,"M_b32":400,"M_b1":70},"peak_rss_mb":4900,"backend":"native"}',
  "",
].join("\n");
const torchOut = [
  '{"workload":"info","framework":"torch","torch_version":"1.13.1","threads":2}',
  '{"train_tokens_per_s":{"S":1400,"M":1000},"sample_tokens_per_s":{"S_b32":4000,"M_b32":800,"M_b1":140},"peak_rss_mb":1100}',
].join("\n");
const peakOut = '{"peak_gflops":150,"threads":2,"matmul_n":2048,"via":"torch 1.13.1"}\n';

test("the last JSON line is found among progress, logs and carriage returns", () => {
  assert.deepEqual(lastJsonLine(engineOut), {
    train_tokens_per_s: { S: 700, M: 250 },
    sample_tokens_per_s: { S_b32: 2000, M_b32: 400, M_b1: 70 },
    peak_rss_mb: 4900,
    backend: "native",
  });
  assert.equal(jsonLines(engineOut).length, 2);
  assert.deepEqual(lastJsonLine('a\n{"x":1}\r{"x":2}\n{not json}\n[1,2]\nnull\n'), { x: 2 });
  assert.equal(lastJsonLine("no json here\n{broken"), undefined);
  assert.equal(lastJsonLine(""), undefined);
});

test("a failed benchmark becomes {skipped: its error line}", () => {
  const nodeStderr = [
    "file:///work/dist/bench/demo.js:12",
    "const res = await runMainJob({",
    "            ^",
    "",
    "InputError [E_BASE]: base checkpoint not found: assets/base/multihop (see docs/main-job.md)",
    "    at runMainJob (file:///work/dist/src/cli/commands/main-job.js:40:11)",
    "",
    "Node.js v20.11.0",
  ].join("\n");
  const e = entryFromRun(
    { command: "node dist/bench/demo.js", stdout: "starting\n", stderr: nodeStderr, code: 1, seconds: 1 },
    meta,
  );
  assert.ok(!isRan(e));
  assert.equal(
    (e as { skipped: string }).skipped,
    "InputError [E_BASE]: base checkpoint not found: assets/base/multihop (see docs/main-job.md)",
  );

  const py =
    "Traceback (most recent call last):\n  File \"x.py\", line 3, in <module>\nModuleNotFoundError: No module named 'torch'\n";
  assert.equal(errorReason(py, { code: 1 }), "ModuleNotFoundError: No module named 'torch'");
  assert.equal(errorReason("something odd happened\n", { code: 2 }), "something odd happened");
  assert.equal(errorReason("", { code: null, signal: "SIGKILL" }), "killed by SIGKILL");
  assert.equal(errorReason("", { code: 3 }), "exit code 3");
  assert.equal(errorReason("Error: x", { code: null, timedOutMinutes: 5 }), "timed out after 5 min");
  // exit 0 without a JSON line is a failure too
  assert.deepEqual(entryFromRun({ command: "c", stdout: "done\n", stderr: "", code: 0, seconds: 1 }, meta), {
    command: "c",
    ...meta,
    skipped: "no JSON line on stdout",
  });
});

test("--only names groups; the engine group brings PyTorch and the peak", () => {
  assert.deepEqual(parseOnly(undefined), ["engine", "rollout", "demo"]);
  assert.deepEqual(parseOnly("rollout, engine"), ["engine", "rollout"]);
  assert.throws(() => parseOnly("engine,gpu"), /unknown benchmark 'gpu'/);
});

test("ratios ours/PyTorch and achieved GFLOPS against the peak", () => {
  const c = compare({ engine: ran("e", engineOut), torch_engine: ran("t", torchOut), peak: ran("p", peakOut) }, PARAMS);
  assert.deepEqual(c.ratios, { train: { S: 0.5, M: 0.25 }, sample: { S_b32: 0.5, M_b32: 0.5, M_b1: 0.5 } });
  assert.equal(c.peak_gflops, 150);
  // 6 * params * tokens/s: S 6e6 * 700 = 4.2 GFLOPS; M 6e7 * 250 = 15 GFLOPS = 10% of 150
  assert.deepEqual(c.ours!.train_gflops, { S: 4.2, M: 15 });
  assert.deepEqual(c.ours!.train_fraction_of_peak, { S: 0.028, M: 0.1 });
  assert.deepEqual(c.ours!.sample_gflops, { S_b32: 4, M_b32: 8, M_b1: 1.4 });
  assert.equal(c.ours!.backend, "native");
  assert.equal(c.torch!.version, "1.13.1");
  assert.equal(c.torch!.threads, 2);
  assert.equal(c.torch!.train_gflops.M, 60);

  // without PyTorch: no ratios; without a peak: GFLOPS but no fraction
  const noTorch = compare(
    { engine: ran("e", engineOut), torch_engine: { command: "t", ...meta, skipped: "no python3 imports torch" } },
    PARAMS,
  );
  assert.equal(noTorch.ratios, null);
  assert.equal(noTorch.torch, null);
  assert.equal(noTorch.peak_gflops, null);
  assert.deepEqual(noTorch.ours!.train_fraction_of_peak, {});
  assert.deepEqual(noTorch.ours!.train_gflops, { S: 4.2, M: 15 });

  // a partial run (shape S only) compares what both measured
  const sOnly = ran("e", '{"train_tokens_per_s":{"S":700},"sample_tokens_per_s":{"S_b32":2000},"peak_rss_mb":1}');
  assert.deepEqual(compare({ engine: sOnly, torch_engine: ran("t", torchOut) }, PARAMS).ratios, {
    train: { S: 0.5 },
    sample: { S_b32: 0.5 },
  });
});

test("results keep every benchmark's line; groups not run are carried from the previous file", () => {
  const previous = {
    benchmarks: {
      engine: {
        command: "old engine",
        date: "2024-12-31T00:00:00.000Z",
        commit: "fedcba9876543210",
        seconds: 1,
        result: { train_tokens_per_s: { S: 1 } },
        lines: [],
      },
      rollout: {
        command: "node dist/bench/rollout.js",
        date: "2024-12-31T00:00:00.000Z",
        commit: "fedcba9876543210",
        seconds: 60,
        result: { throughput_kept_with_200ms_tools: 0.99, turn8_over_turn1_prefill: 0.93 },
        lines: [],
      },
    },
  };
  const entries = {
    engine: ran("node dist/bench/engine.js", engineOut),
    torch_engine: ran("python3 bench/torch_engine.py", torchOut),
    peak: ran("python3 bench/torch_engine.py --peak", peakOut),
  };
  const res = assembleResults({
    machine,
    run: { only: ["engine", "demo"], quick: false },
    entries,
    params: PARAMS,
    previous,
  });
  assert.deepEqual(Object.keys(res.benchmarks).sort(), ["engine", "peak", "rollout", "torch_engine"]);
  assert.equal(res.benchmarks.engine!.command, "node dist/bench/engine.js"); // this run's, not the old one
  assert.equal(res.benchmarks.rollout!.commit, "fedcba9876543210"); // carried, with its own commit
  assert.deepEqual((res.benchmarks.engine as { result: unknown }).result, lastJsonLine(engineOut));
  assert.ok(res.comparison.ratios);
  assert.deepEqual(JSON.parse(JSON.stringify(res)), res, "results.json round-trips");

  const md = markdown(res);
  assert.match(md, /^Machine: Test CPU, 2 cores, 8 GB, Node v20\.0\.0/);
  assert.match(md, /Peak: 150 GFLOPS \(torch 1\.13\.1, 2 threads, 2048² float32 matmul\)/);
  assert.match(md, /\| engine \| agent-r1 \(native\) \| PyTorch 1\.13\.1 \(2 threads\) \| agent-r1 \/ PyTorch \|/);
  assert.match(md, /\| M train tokens\/s \| 250 \| 1,000 \| 0\.25 \|/);
  assert.match(md, /\| S train GFLOPS \(of peak\) \| 4\.2 \(2\.8%\) \| 8\.4 \(5\.6%\) \| {2}\|/);
  assert.match(md, /\| S sample tokens\/s, batch 32 \| 2,000 \| 4,000 \| 0\.50 \|/);
  assert.match(md, /\| M train GFLOPS \(of peak\) \| 15 \(10%\) \| 60 \(40%\) \| {2}\|/);
  assert.match(md, /\| peak RSS, MB \| 4,900 \| 1,100 \| {2}\|/);
  assert.match(md, /^engine: `node dist\/bench\/engine\.js`; PyTorch: `python3 bench\/torch_engine\.py`\.$/m);
  assert.match(md, /rollout: `node dist\/bench\/rollout\.js` \(2024-12-31, fedcba9\)/);
  assert.match(md, /\| throughput kept with 200ms tools \| 0\.99 \|/);
  assert.doesNotMatch(md, /main job/); // demo: not run, nothing carried

  // without PyTorch, the engine table has one figure column and the main job's skip is shown
  const res2 = assembleResults({
    machine,
    run: { only: ["engine", "demo"], quick: false },
    entries: {
      engine: entries.engine,
      torch_engine: { command: "python3 bench/torch_engine.py", ...meta, skipped: "no python3 imports torch" },
      demo: { command: "node dist/bench/demo.js", ...meta, skipped: "Error: base checkpoint not found" },
    },
    params: PARAMS,
  });
  assert.equal(res2.comparison.ratios, null);
  const md2 = markdown(res2);
  assert.match(md2, /^\| engine \| agent-r1 \(native\) \|$/m);
  assert.match(md2, /^\| M sample tokens\/s, batch 1 \| 70 \|$/m);
  assert.match(md2, /PyTorch skipped: no python3 imports torch/);
  assert.match(md2, /main job skipped: Error: base checkpoint not found\./);
});

test("engine.ts's torch_ratio: ours / PyTorch, 2 decimals, only what both measured", () => {
  assert.deepEqual(ratioMap({ a: 1, b: 2, c: 3 }, { a: 3, b: 0 }), { a: 0.333 });
  assert.deepEqual(ratioMap({ a: 1 }, { a: 3 }, 2), { a: 0.33 });
  const ours = lastJsonLine(engineOut)!,
    torch = lastJsonLine(torchOut)!;
  assert.deepEqual(torchRatio(ours, torch), { train_S: 0.5, train_M: 0.25, sample_S_b32: 0.5, sample_M_b32: 0.5 }); // no M_b1
  const sOnly = {
    train_tokens_per_s: { S: 1000 },
    sample_tokens_per_s: { S_b32: 1000 },
    peak_rss_mb: 1,
    backend: "native",
  };
  assert.deepEqual(torchRatio(sOnly, torch), { train_S: 0.71, sample_S_b32: 0.25 });

  const run = (stdout: string, code = 0, stderr = "") => ({
    command: "python3 bench/torch_engine.py",
    stdout,
    stderr,
    code,
    seconds: 1,
  });
  assert.deepEqual(torchRatioFromRun(sOnly, run(torchOut)), { ratio: { train_S: 0.71, sample_S_b32: 0.25 } });
  assert.deepEqual(torchRatioFromRun(sOnly, run("", 1, "Traceback:\nRuntimeError: out of memory\n")), {
    skipped: "RuntimeError: out of memory",
  });
  assert.deepEqual(torchRatioFromRun(sOnly, run("nothing\n")), { skipped: "no JSON line on stdout" });
  assert.deepEqual(torchRatioFromRun(sOnly, run('{"train_tokens_per_s":{"M":5},"sample_tokens_per_s":{}}')), {
    skipped: "no workload measured by both",
  });
});
