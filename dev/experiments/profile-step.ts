/**
 * Where one training step's time goes, kernel by kernel. One in-process replica (workers 0, BLAS
 * threads from THREADS, default 1) on SHAPE (S|M), half the bench batch (8 x 256 tokens: what one of
 * the bench's two replicas gets). Warms up, then profiles forwardBackward + optimStep REPS times with
 * tf.profile and prints kernel totals per step, largest first, plus the wall time the profile did not
 * attribute to kernels. Environment: SHAPE, REPS (2), THREADS (1), ROWS (8), BACKEND (native|tfjs), TOP (30).
 */
import { LocalEngine } from "../../src/engine/local/local-engine.js";
import { tf } from "../../src/engine/local/tfjs/tf-backend.js";
import { modelDir, trainDatums, SHAPES } from "./fused-common.js";
import { required } from "./usage.js";

const USAGE =
  "[SHAPE=S|M] [REPS=2] [THREADS=1] node --import tsx dev/experiments/profile-step.ts WORK_DIR  (WORK_DIR holds the S/M models, made on the first run)";
const work = required(process.argv[2], "WORK_DIR", USAGE);
const shape = (process.env.SHAPE ?? "S") as "S" | "M";
const reps = Number(process.env.REPS ?? 2);
const threads = Number(process.env.THREADS ?? 1);
const dir = await modelDir(work, shape);
const datums = trainDatums(SHAPES[shape].vocab, Number(process.env.ROWS ?? 8));
const e = await LocalEngine.load(dir, {
  backend: (process.env.BACKEND ?? "native") as "native" | "tfjs",
  workers: 0,
  blasThreads: threads,
});
const step = async () => {
  await e.forwardBackward(datums, { type: "importance_sampling" });
  await e.optimStep({ lr: 1e-5, gradClipNorm: 1 });
};
await step();
const byKernel = new Map<string, { ms: number; calls: number }>();
let wall = 0,
  kernelMs = 0;
for (let r = 0; r < reps; r++) {
  const t0 = performance.now();
  const prof = await tf.profile(step);
  wall += performance.now() - t0;
  for (const k of prof.kernels) {
    const ms = typeof k.kernelTimeMs === "number" ? k.kernelTimeMs : 0;
    const cur = byKernel.get(k.name) ?? { ms: 0, calls: 0 };
    cur.ms += ms;
    cur.calls += 1;
    byKernel.set(k.name, cur);
    kernelMs += ms;
  }
}
const rows = [...byKernel.entries()].sort((a, b) => b[1].ms - a[1].ms);
console.log(
  `${shape} train step, ${datums.length} x 256 tokens, ${threads} BLAS thread(s): wall ${(wall / reps).toFixed(0)} ms, kernels ${(kernelMs / reps).toFixed(0)} ms`,
);
for (const [name, v] of rows.slice(0, Number(process.env.TOP ?? 30))) {
  console.log(
    `${name.padEnd(34)} ${(v.ms / reps).toFixed(1).padStart(8)} ms ${String(v.calls / reps).padStart(6)} calls ${((100 * v.ms) / kernelMs).toFixed(1).padStart(5)} %`,
  );
}
await e.dispose();
