/**
 * Which matrix products the engine runs, and the own kernels' time against the system BLAS's on
 * each: the addon's gemm is wrapped so that every call the engine makes runs on both (in
 * alternating order, each with its own clock), grouped by shape. One in-process replica, one
 * thread. WHAT=train (one forward-backward of 8 x 256 tokens) or sample (32 prompts, 32 tokens).
 */
import { loadAddon, type Addon } from "../../src/engine/local/addon.js";
import { LocalEngine } from "../../src/engine/local/local-engine.js";
import { modelDir, prompts, SHAPES, trainDatums } from "./fused-common.js";
import { required } from "./usage.js";

const USAGE =
  "[SHAPE=S|M] [WHAT=train|sample] node --import tsx dev/experiments/gemm-profile.ts WORK_DIR  (needs an addon built with a system BLAS)";
const work = required(process.argv[2], "WORK_DIR", USAGE);
const shape = (process.env.SHAPE ?? "M") as "S" | "M";
const what = process.env.WHAT ?? "train";

const st = loadAddon();
if (!st.ok) throw new Error(st.reason);
if (st.addon.info().system === null) throw new Error("this addon has no system BLAS to compare with");
const addon = st.addon;
type Row = { calls: number; own: number; system: number; flops: number };
const rows = new Map<string, Row>();
let flip = false;
const gemm: Addon["gemm"] = (a, b, c, batch, m, n, k, ta, tb, ai, bi) => {
  const key = `batch ${batch} (${m}, ${n}, ${k}) ${ta ? "T" : "N"}${tb ? "T" : "N"}`;
  const row = rows.get(key) ?? { calls: 0, own: 0, system: 0, flops: 0 };
  rows.set(key, row);
  row.calls++;
  row.flops += 2 * batch * m * n * k;
  flip = !flip;
  for (const impl of flip ? (["own", "system"] as const) : (["system", "own"] as const)) {
    addon.setBlas(impl);
    const t0 = performance.now();
    addon.gemm(a, b, c, batch, m, n, k, ta, tb, ai, bi);
    row[impl] += performance.now() - t0;
  }
};
// The engine reads the addon through loadAddon()'s cached status: hand it a wrapper.
(st as { addon: Addon }).addon = Object.create(addon, { gemm: { value: gemm } });

const engine = await LocalEngine.load(await modelDir(work, shape), { workers: 0, backend: "native", blasThreads: 1 });
const vocab = SHAPES[shape].vocab;
if (what === "train") await engine.forwardBackward(trainDatums(vocab, 8), { type: "importance_sampling" });
else await Promise.all(prompts(vocab).map((p, i) => engine.sample(p, { maxTokens: 32, stop: [], seed: i })));
await engine.dispose();

let own = 0,
  system = 0;
for (const r of rows.values()) ((own += r.own), (system += r.system));
for (const [key, r] of [...rows.entries()].sort((x, y) => y[1].system - x[1].system).slice(0, 24))
  console.log(
    `${key.padEnd(30)} ${String(r.calls).padStart(5)} calls  own ${r.own.toFixed(1).padStart(7)} ms  system ${r.system.toFixed(1).padStart(7)} ms  system/own ${(r.system / r.own).toFixed(2)}  own ${(r.flops / r.own / 1e6).toFixed(0)} GFLOPS`,
  );
console.log(
  `all products: own ${own.toFixed(0)} ms, system ${system.toFixed(0)} ms, system/own ${(system / own).toFixed(3)}`,
);
