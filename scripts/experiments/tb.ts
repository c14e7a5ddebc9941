/** Session experiment (issue 6 warm start), kept so docs/main-job.md figures can be reproduced. */
import { join } from "node:path";
import { tmpdir } from "node:os";
import { initModel } from "../../src/model/init-model.js";
import { LocalEngine } from "../../src/engine/local/local-engine.js";
import { Rng } from "../../src/util/rng.js";
const preset = (process.argv[2] ?? "tiny") as "tiny";
const len = Number(process.argv[4] ?? 540), n = Number(process.argv[5] ?? 16);
const dir = join(tmpdir(), `mjbt-${preset}`);
await initModel({ preset, out: dir, tokenizer: "/tmp/mj/tok1024" });
const e = await LocalEngine.load(dir, { workers: Number(process.argv[3] ?? 2) });
const rng = new Rng(7);
const datums = Array.from({ length: n }, () => { const s = Array.from({ length: len + 1 }, () => 3 + rng.int(1000)); return { tokens: s.slice(0, -1), targetTokens: s.slice(1), weights: s.slice(1).map((_, i) => (i > 300 ? 1 : 0)) }; });
for (let i = 0; i < 3; i++) {
  const t0 = performance.now();
  await e.forwardBackward(datums, { type: "cross_entropy" });
  const t1 = performance.now();
  await e.optimStep({ lr: 1e-5 });
  const t2 = performance.now();
  console.log(`fb ${(t1 - t0).toFixed(0)} opt ${(t2 - t1).toFixed(0)} tok/s ${((len * n) / ((t2 - t0) / 1000)).toFixed(0)}`);
}
await e.dispose();
