/**
 * The Tinker protocol's cost: iterations of the multihop recipe (from the committed base) trained
 * in-process, then the same iterations through `agent-r1 serve --tinker` in another process on
 * loopback, in each wire generation. Prints one JSON line per run and a summary:
 *   {"local_s":x,"json_s":y,"protobuf_s":z,"json_overhead":(y-x)/x,"protobuf_overhead":(z-x)/x,"iterations":n}
 * where each figure is the mean wall time of an iteration (rollout + update, from metrics.jsonl),
 * the first iteration left out (it warms caches on both sides). Both sides use the same engine
 * settings (2 worker replicas), and run one after the other, so they never share the cores.
 *   npm run bench:remote [-- --iterations N] [-- --batch N]
 */
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { runCli } from "../src/cli/main.js";

const { values: args } = parseArgs({
  options: { iterations: { type: "string", default: "5" }, batch: { type: "string", default: "8" } },
});
const ITERATIONS = Number(args.iterations),
  BATCH = Number(args.batch);
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

async function main() {
  const local = await run("local", `model: { path: ${JSON.stringify(BASE)} }`);
  const server = await serve();
  const remote = (sdk: string) => `model: { tokenizer: ${JSON.stringify(BASE)} }
engine:
  kind: tinker
  tinker: { url: ${JSON.stringify(server.url)}, baseModel: multihop, sdkVersion: "${sdk}" }`;
  try {
    const json = await run("json", remote("0.24.1"));
    const protobuf = await run("protobuf", remote("0.25.0"));
    const r = (x: number) => Math.round(x * 1000) / 1000;
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
