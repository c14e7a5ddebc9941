/**
 * Time of drawing one token per row from 32 rows of 151,936 logits (Qwen2.5's vocabulary) at
 * temperature 0.9 without top-k / top-p, as the sampler does for a batch-32 decode step, and a
 * checksum of the draws (tokens and logprobs), which must not change when the code gets faster;
 * then the same draws in C (drawTokens, native/kernels/draw_rows.c, on 1 and 2 threads) with the same
 * uniforms, and how many of its tokens match.
 */
import { drawToken } from "../../src/engine/sampling.js";
import { loadAddon } from "../../src/engine/local/addon.js";
import { Rng } from "../../src/util/rng.js";
import { required } from "./usage.js";

const USAGE = "node --import tsx dev/experiments/draw-bench.ts REPS";
const reps = Number(required(process.argv[2], "REPS", USAGE));
const V = 151936;
const r = new Rng(3);
const rows = Array.from({ length: 32 }, () => Float32Array.from({ length: V }, () => r.normal() * 2));
const params = { temperature: 0.9, topK: 0, topP: 1 };
for (const row of rows) drawToken(row, params, new Rng(1)); // warm-up
let checksum = 0;
const t0 = performance.now();
for (let rep = 0; rep < reps; rep++)
  rows.forEach((row, i) => {
    const d = drawToken(row, params, new Rng(i + rep));
    checksum += d.token + d.logprob;
  });
console.log(`${((performance.now() - t0) / reps).toFixed(1)} ms per 32 rows; checksum ${checksum}`);

const st = loadAddon();
if (st.ok) {
  const u = rows.map((_, i) => new Rng(i).next());
  const want = rows.map((row, i) => drawToken(row, params, new Rng(i)).token);
  const tokens = new Int32Array(32),
    logprobs = new Float64Array(32);
  for (const threads of [1, 2]) {
    st.addon.setFusedThreads(threads);
    const t1 = performance.now();
    for (let rep = 0; rep < reps; rep++)
      st.addon.drawTokens(rows, new Float64Array(32).fill(0.9), Float64Array.from(u), tokens, logprobs);
    const same = want.filter((t, i) => t === tokens[i]).length;
    console.log(
      `C, ${threads} thread(s): ${((performance.now() - t1) / reps).toFixed(2)} ms per 32 rows; ${same} of 32 tokens as in JS`,
    );
  }
}
