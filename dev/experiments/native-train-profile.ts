/**
 * Runs the engine bench's S or M training workload on one engine for a number of steps, to
 * profile it (e.g. under `perf record -g`): 16 x 256 tokens, importance-sampling loss, AdamW.
 * Prints each step's forward-backward and optimizer times and the tokens per second.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { join } from "node:path";
import { tmpdir } from "node:os";
import { initModel } from "../../src/model/init-model.js";
import { LocalEngine } from "../../src/engine/local/local-engine.js";
import type { Datum } from "../../src/engine/types.js";
import { Rng } from "../../src/util/rng.js";
import { required } from "./usage.js";

const USAGE = "node --import tsx dev/experiments/native-train-profile.ts S|M native|tfjs STEPS";
const shape = required(process.argv[2], "S|M", USAGE);
const backend = required(process.argv[3], "native|tfjs", USAGE);
const steps = required(process.argv[4], "STEPS", USAGE);
const root = mkdtempSync(join(tmpdir(), "agent-r1-prof-"));
const dir = join(root, "m");
await initModel({ preset: shape === "S" ? "small" : "medium", out: dir });
const engine = await LocalEngine.load(dir, { backend: backend as "native" | "tfjs" });
const V = engine.config.vocabSize,
  rng = new Rng(7);
const datums: Datum[] = Array.from({ length: 16 }, () => {
  const seq = Array.from({ length: 257 }, () => 3 + rng.int(V - 3));
  return {
    tokens: seq.slice(0, -1),
    targetTokens: seq.slice(1),
    weights: seq.slice(1).map(() => 1),
    advantages: seq.slice(1).map(() => rng.normal()),
    logprobs: seq.slice(1).map(() => -Math.log(V)),
  };
});
await engine.forwardBackward(datums, { type: "importance_sampling" });
await engine.optimStep({ lr: 1e-5 });
const t0 = performance.now();
for (let i = 0; i < Number(steps); i++) {
  const a = performance.now();
  await engine.forwardBackward(datums, { type: "importance_sampling" });
  const b = performance.now();
  await engine.optimStep({ lr: 1e-5 });
  console.log(`fb ${(b - a).toFixed(0)} ms, step ${(performance.now() - b).toFixed(0)} ms`);
}
const s = (performance.now() - t0) / 1000 / Number(steps);
console.log(`${shape} ${backend}: ${((16 * 256) / s).toFixed(0)} tokens/s`);
await engine.dispose();
rmSync(root, { recursive: true, force: true });
