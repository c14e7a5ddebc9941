/**
 * The fused-kernel A/B of the native backend, interleaved in one process: A = fused kernels off
 * (AGENT_R1_FUSED=0: the TF.js compositions, matrix products still on BLAS), B = fused on. Each round
 * loads a fresh engine (default workers, as bench/engine.ts), warms up, times REPS steps and disposes;
 * rounds alternate A B A B ... Environment: SHAPE=S|M, WHAT=train|sample, ROUNDS (3), REPS (2).
 */
import { LocalEngine } from "../../src/engine/local/local-engine.js";
import { modelDir, trainDatums, prompts, SHAPES } from "./fused-common.js";
import { required } from "./usage.js";

const USAGE =
  "[SHAPE=S|M] [WHAT=train|sample] [ROUNDS=3] [REPS=2] node --import tsx dev/experiments/fused-ab.ts WORK_DIR  (WORK_DIR holds the S/M models, made on the first run)";
const work = required(process.argv[2], "WORK_DIR", USAGE);
const shape = (process.env.SHAPE ?? "S") as "S" | "M";
const what = process.env.WHAT ?? "train";
const rounds = Number(process.env.ROUNDS ?? 3),
  reps = Number(process.env.REPS ?? 2);
const dir = await modelDir(work, shape);
const vocab = SHAPES[shape].vocab;
const datums = trainDatums(vocab);
const ps = prompts(vocab);
const results: Record<string, number[]> = { A: [], B: [] };
for (let r = 0; r < rounds; r++) {
  for (const arm of ["A", "B"] as const) {
    if (arm === "A") process.env.AGENT_R1_FUSED = "0";
    else delete process.env.AGENT_R1_FUSED;
    const e = await LocalEngine.load(dir, { backend: "native" });
    const step =
      what === "train"
        ? async () => {
            await e.forwardBackward(datums, { type: "importance_sampling" });
            await e.optimStep({ lr: 1e-5 });
          }
        : async () => {
            await Promise.all(ps.map((p, i) => e.sample(p, { maxTokens: 192, stop: [], seed: i })));
          };
    await step();
    const t0 = performance.now();
    for (let i = 0; i < reps; i++) await step();
    const s = (performance.now() - t0) / 1000 / reps;
    const tps = (what === "train" ? 16 * 256 : 32 * 192) / s;
    results[arm].push(tps);
    console.log(
      JSON.stringify({
        round: r,
        arm,
        fused: arm === "B",
        shape,
        what,
        tokens_per_s: Math.round(tps),
        s_per_step: +s.toFixed(3),
      }),
    );
    await e.dispose();
  }
}
const med = (a: number[]) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)];
console.log(
  JSON.stringify({
    shape,
    what,
    A_off: results.A.map(Math.round),
    B_on: results.B.map(Math.round),
    median_A: Math.round(med(results.A)),
    median_B: Math.round(med(results.B)),
    speedup: +(med(results.B) / med(results.A)).toFixed(2),
  }),
);
