/**
 * Training throughput: cross-entropy forwardBackward + optimStep on N random datums of LEN tokens (loss
 * on the positions after 300), three timed steps, on a fresh preset model over the given tokenizer
 * (dev/LOG.md, 2026-11-22, training throughput; its figures used a 1,024-id task tokenizer).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { join } from "node:path";
import { tmpdir } from "node:os";
import { initModel } from "../../src/model/init-model.js";
import { LocalEngine } from "../../src/engine/local/local-engine.js";
import { Rng } from "../../src/util/rng.js";
import { required } from "./usage.js";

const USAGE =
  "node --import tsx dev/experiments/tb.ts TOKENIZER_DIR [preset: tiny] [workers: 2] [tokens per datum: 540] [datums: 16]";
const [tokArg, preset = "tiny", workers = "2", lenArg = "540", nArg = "16"] = process.argv.slice(2);
const tok = required(tokArg, "TOKENIZER_DIR", USAGE);
const len = Number(lenArg),
  n = Number(nArg);
const dir = mkdtempSync(join(tmpdir(), "agent-r1-tb-"));
try {
  await initModel({ preset: preset as "tiny", out: dir, tokenizer: tok });
  const e = await LocalEngine.load(dir, { workers: Number(workers) });
  // Ids past the three special tokens, within the first 1,000 (all of a 1,024-id vocabulary's ordinary ids).
  const ids = Math.min(1000, e.tokenizer.vocabSize - 3);
  const rng = new Rng(7);
  const datums = Array.from({ length: n }, () => {
    const s = Array.from({ length: len + 1 }, () => 3 + rng.int(ids));
    return { tokens: s.slice(0, -1), targetTokens: s.slice(1), weights: s.slice(1).map((_, i) => (i > 300 ? 1 : 0)) };
  });
  for (let i = 0; i < 3; i++) {
    const t0 = performance.now();
    await e.forwardBackward(datums, { type: "cross_entropy" });
    const t1 = performance.now();
    await e.optimStep({ lr: 1e-5 });
    const t2 = performance.now();
    console.log(
      `fb ${(t1 - t0).toFixed(0)} opt ${(t2 - t1).toFixed(0)} tok/s ${((len * n) / ((t2 - t0) / 1000)).toFixed(0)}`,
    );
  }
  await e.dispose();
} finally {
  rmSync(dir, { recursive: true, force: true });
}
