/**
 * The Tinker protocol's cost: iterations of the multihop recipe (from the committed base) trained
 * in-process, then the same iterations through `agent-r1 serve --tinker` in another process on
 * loopback, in each wire generation. Prints one JSON line per run and a summary:
 *   {"local_s":x,"json_s":y,"protobuf_s":z,"json_overhead":(y-x)/x,"protobuf_overhead":(z-x)/x,"iterations":n}
 * where each figure is the mean wall time of an iteration (rollout + update, from metrics.jsonl),
 * the first iteration left out (it warms caches on both sides). Both sides use the same engine
 * settings (2 worker replicas), and run one after the other, so they never share the cores.
 *
 * Then lockstep against asynchronous training (train.async, maxStaleness 1, onStale wait) through
 * the same server (protobuf), with a simulated sampler latency: every sample call waits
 * --latency-ms first (bench/simulated-latency.ts), as with a far or busy inference server; and,
 * with --env-ms, every env step waits that long too (a slow tool). Each figure is the mean wall
 * time between the ends of consecutive iterations, the first left out:
 *   {"lockstep_s":x,"async_s":y,"async_speedup":x/y,"latency_ms":ms,"env_ms":ms,...}
 * --in-process runs that comparison on the in-process engine instead of through the server.
 *   npm run bench:remote [-- --iterations N] [-- --batch N] [-- --latency-ms MS] [-- --env-ms MS]
 *     [-- --only protocol|async] [-- --in-process]
 */
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { runCli } from "../src/cli/main.js";
import { enginesFor } from "../src/engine/engines-for.js";
import { loadConfig } from "../src/train/load-config.js";
import { Trainer, type IterationMetrics } from "../src/train/trainer.js";
import { loadTask } from "../src/tasks/index.js";
import { slowEnvSteps, slowSampling } from "./simulated-latency.js";

const { values: args } = parseArgs({
  options: {
    iterations: { type: "string", default: "5" },
    batch: { type: "string", default: "8" },
    "latency-ms": { type: "string", default: "500" },
    "env-ms": { type: "string", default: "0" },
    only: { type: "string" },
    "in-process": { type: "boolean", default: false },
  },
});
const ITERATIONS = Number(args.iterations),
  BATCH = Number(args.batch),
  LATENCY_MS = Number(args["latency-ms"]),
  ENV_MS = Number(args["env-ms"]);
const PARTS = new Set(args.only ? args.only.split(",") : ["protocol", "async"]);
const BASE = fileURLToPath(new URL("../../assets/base/multihop", import.meta.url));
const CLI = fileURLToPath(new URL("../src/cli/main.js", import.meta.url));
const root = mkdtempSync(join(tmpdir(), "agent-r1-bench-remote-"));

const recipe = (engine: string) => `
task: { name: multihop }
rollout: { n: 8, maxTurns: 5, maxTokensPerTurn: 96, maxTotalTokens: 1024, temperature: 1 }
algorithm: { estimator: grpo, filterConstantGroups: true }
loss: { type: ppo, dualClip: 0 }
optim: { lr: 0.0001, gradClipNorm: 1 }
train: { iterations: ${ITERATIONS}, batchSize: ${BATCH}, valEvery: 0, checkpointEvery: 0 }
${engine}`;

async function run(name: string, engine: string): Promise<number> {
  const cfg = join(root, `${name}.yaml`);
  writeFileSync(cfg, recipe(engine));
  const out = join(root, name);
  const errs: string[] = [];
  const code = await runCli(["train", "--config", cfg, "--out", out], {
    out: () => {},
    err: (l) => errs.push(l),
    readStdin: async () => "",
  });
  if (code !== 0) throw new Error(`${name}: ${errs.join(" | ")}`);
  const lines = readFileSync(join(out, "metrics.jsonl"), "utf8")
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as { rollout_s: number; train_s: number });
  const steady = lines.slice(1);
  const mean = (f: (m: (typeof lines)[number]) => number) => steady.reduce((a, m) => a + f(m), 0) / steady.length;
  const s = mean((m) => m.rollout_s + m.train_s);
  const r = (x: number) => Math.round(x * 1000) / 1000;
  console.log(
    JSON.stringify({
      run: name,
      iteration_s: r(s),
      rollout_s: r(mean((m) => m.rollout_s)),
      train_s: r(mean((m) => m.train_s)),
      iterations: lines.length,
    }),
  );
  return s;
}

const round = (x: number) => Math.round(x * 1000) / 1000;
const meanOf = (ms: IterationMetrics[], key: string) => ms.reduce((a, m) => a + (m[key] ?? 0), 0) / ms.length;

/**
 * One run on the trainer itself (so the engines and the task can be wrapped), every sample call
 * LATENCY_MS and every env step ENV_MS late: the mean wall time between the ends of consecutive
 * iterations, the first iteration left out.
 */
async function timedRun(name: string, engine: string, overrides: string[]): Promise<number> {
  const file = join(root, `${name}.yaml`);
  writeFileSync(file, recipe(engine));
  const config = loadConfig(file, overrides);
  const task = await loadTask(config.task);
  const trainer = await Trainer.open(config, {
    out: join(root, name),
    task: slowEnvSteps(task, ENV_MS),
    engines: slowSampling(enginesFor(config.engine), LATENCY_MS),
  });
  const ends: number[] = [],
    lines: IterationMetrics[] = [];
  try {
    while (trainer.iteration < config.train.iterations) {
      lines.push(await trainer.step());
      ends.push(performance.now());
    }
  } finally {
    await trainer.close();
    await task.close?.();
  }
  const s = (ends[ends.length - 1] - ends[0]) / (ends.length - 1) / 1000;
  const steady = lines.slice(1);
  console.log(
    JSON.stringify({
      run: name,
      iteration_s: round(s),
      rollout_s: round(meanOf(steady, "rollout_s")),
      train_s: round(meanOf(steady, "train_s")),
      ...(config.train.async
        ? {
            learner_wait_s: round(meanOf(steady, "learner_wait_s")),
            producer_wait_s: round(meanOf(steady, "producer_wait_s")),
            staleness_mean: round(meanOf(steady, "staleness_mean")),
          }
        : {}),
      iterations: lines.length,
    }),
  );
  return s;
}

async function serve(): Promise<{ url: string; stop: () => void }> {
  const child = spawn(
    process.execPath,
    [
      CLI,
      "serve",
      "--tinker",
      "--model",
      BASE,
      "--name",
      "multihop",
      "--port",
      "0",
      "--state-dir",
      join(root, "state"),
    ],
    { stdio: ["ignore", "pipe", "inherit"] },
  );
  const url = await new Promise<string>((resolve, reject) => {
    child.stdout!.on("data", (d) => {
      const m = /on (http:\/\/\S+)/.exec(String(d));
      if (m) resolve(m[1]);
    });
    child.on("exit", (c) => reject(new Error(`serve --tinker exited ${c}`)));
  });
  return { url, stop: () => child.kill("SIGTERM") };
}

/** The protocol's cost: in-process, then JSON and protobuf through the server. */
async function protocolRuns(local: number, remote: (sdk: string) => string): Promise<void> {
  const json = await run("json", remote("0.24.1"));
  const protobuf = await run("protobuf", remote("0.25.0"));
  const r = round;
  console.log(
    JSON.stringify({
      local_s: r(local),
      json_s: r(json),
      protobuf_s: r(protobuf),
      json_overhead: r((json - local) / local),
      protobuf_overhead: r((protobuf - local) / local),
      iterations: ITERATIONS,
      batch: BATCH,
    }),
  );
}

/** Lockstep, then train.async (k = 1, wait), through the server with the simulated sampler latency. */
async function asyncRuns(remote: string): Promise<void> {
  const lockstep = await timedRun("lockstep-latency", remote, []);
  const async = await timedRun("async-latency", remote, ["train.async.maxStaleness=1"]);
  console.log(
    JSON.stringify({
      lockstep_s: round(lockstep),
      async_s: round(async),
      async_speedup: round(lockstep / async),
      latency_ms: LATENCY_MS,
      env_ms: ENV_MS,
      iterations: ITERATIONS,
      batch: BATCH,
    }),
  );
}

async function main() {
  const local = PARTS.has("protocol") ? await run("local", `model: { path: ${JSON.stringify(BASE)} }`) : 0;
  const server = await serve();
  // Full weights, as the in-process runs train (the recipe's default is a LoRA that also targets lm_head,
  // which the committed base ties to its embedding, so the server refuses it).
  const remote = (sdk: string) => `model: { tokenizer: ${JSON.stringify(BASE)} }
engine:
  kind: tinker
  tinker: { url: ${JSON.stringify(server.url)}, baseModel: multihop, sdkVersion: "${sdk}", lora: null }`;
  try {
    if (PARTS.has("protocol")) await protocolRuns(local, remote);
    if (PARTS.has("async"))
      await asyncRuns(args["in-process"] ? `model: { path: ${JSON.stringify(BASE)} }` : remote("0.25.0"));
  } finally {
    server.stop();
    rmSync(root, { recursive: true, force: true });
  }
}

main().then(
  () => process.exit(0),
  (e) => {
    console.error(`bench:remote: ${e instanceof Error ? e.message : String(e)}`);
    process.exit(1);
  },
);
