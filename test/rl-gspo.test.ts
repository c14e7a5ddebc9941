/**
 * GSPO (src/rl/policy-loss.ts): the sequence log-ratio, the clipped objective on it by hand, its
 * GSPO-token gradient equal to the sequence objective's (finite differences, one advantage per
 * sequence, seq-mean-token-mean), and both local engines computing the same loss and gradients.
 */
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { policyTokenLoss, resolvedLoss, sequenceLogRatio, tokenLossGrad, GSPO_CLIP } from "../src/rl/policy-loss.js";
import { initModel } from "../src/model/init-model.js";
import { LocalEngine } from "../src/engine/local/local-engine.js";
import type { Datum } from "../src/engine/types.js";
import { Rng } from "../src/util/rng.js";
import { ENGINES, gradients } from "./engine-internals.js";

/** The transpose of a (rows, cols) row-major matrix. */
function transpose(m: Float64Array, rows: number, cols: number): Float64Array {
  const out = new Float64Array(m.length);
  for (let i = 0; i < rows; i++) for (let j = 0; j < cols; j++) out[j * rows + i] = m[i * cols + j];
  return out;
}

const near = (a: number, b: number, tol = 1e-12) => assert.ok(Math.abs(a - b) <= tol, `${a} vs ${b}`);

test("GSPO by hand: the mean log-ratio over weighted tokens, the clip on the sequence ratio, dual clip, the clamp", () => {
  const p = [-1, -2, -3],
    q = [-1.5, -2, -2.7];
  near(
    sequenceLogRatio((t) => p[t], q, [1, 0, 1]),
    (0.5 - 0.3) / 2,
  );
  near(
    sequenceLogRatio((t) => p[t], q, [0, 0, 0]),
    0,
  );
  const gspo = resolvedLoss({ type: "gspo" });
  assert.deepEqual([gspo.clipLow, gspo.clipHigh], [GSPO_CLIP.low, GSPO_CLIP.high]);
  // s = e^0.1 is past 1 + 4e-4: with A = 2 the clipped term wins, no gradient
  const s = Math.exp(0.1);
  let r = tokenLossGrad(gspo, -1, -1.2, 2, 0, 0.1);
  near(r.loss, -(1 + 4e-4) * 2);
  near(r.grad, 0);
  assert.equal(policyTokenLoss(gspo, -1, -1.2, 2, 0.1).clipped, true);
  // with A = -1 the unclipped term is the max: l = s, dl/dp = -A·s
  r = tokenLossGrad(gspo, -1, -1.2, -1, 0, 0.1);
  near(r.loss, s);
  near(r.grad, s);
  // inside the clip range: l = -s·A
  r = tokenLossGrad(gspo, -1, -1.2, 0.5, 0, 1e-4);
  near(r.loss, -Math.exp(1e-4) * 0.5);
  near(r.grad, -Math.exp(1e-4) * 0.5);
  // dual clip caps a negative advantage's loss at -A·c
  const dual = resolvedLoss({ type: "gspo", dualClip: 2 });
  r = tokenLossGrad(dual, -1, -1.2, -1, 0, Math.log(5));
  near(r.loss, 2);
  near(r.grad, 0);
  // the mean log-ratio is clamped at ±10: no gradient beyond
  r = tokenLossGrad(resolvedLoss({ type: "gspo", clipHigh: 1e9 }), -1, -1.2, 1, 0, 11);
  near(r.loss, -Math.exp(10), 1e-6);
  near(r.grad, 0);
});

test("GSPO-token's gradient is the sequence objective's (one advantage per sequence, token mean within it)", () => {
  const rng = new Rng(5);
  let checked = 0;
  for (const spec of [{ type: "gspo" as const }, { type: "gspo" as const, clipLow: 0.2, clipHigh: 0.3 }]) {
    const loss = resolvedLoss(spec);
    for (let i = 0; i < 200; i++) {
      const n = 1 + rng.int(6);
      const q = Array.from({ length: n }, () => -3 * rng.next());
      const p = q.map((x) => x + 0.05 * rng.normal());
      const a = 2 * rng.normal();
      const weights = p.map(() => 1);
      // the sequence objective: -min(s·A, clip(s)·A) with s from every token
      const J = (x: number[]) => {
        const s = Math.exp(sequenceLogRatio((t) => x[t], q, weights));
        const c = Math.max(1 - loss.clipLow, Math.min(1 + loss.clipHigh, s));
        let l = Math.max(-s * a, -c * a);
        if (a < 0) l = Math.min(l, -a * loss.dualClip);
        return l;
      };
      const L = sequenceLogRatio((t) => p[t], q, weights);
      for (let k = 0; k < n; k++) {
        const h = 1e-7;
        const at = (d: number) => J(p.map((x, t) => (t === k ? x + d : x)));
        const left = (at(0) - at(-h)) / h,
          right = (at(h) - at(0)) / h;
        if (Math.abs(left - right) > 1e-4 * Math.max(1, Math.abs(left))) continue; // a kink: the clip boundary
        const fd = (at(h) - at(-h)) / (2 * h);
        const g = tokenLossGrad(loss, p[k], q[k], a, 0, L).grad / n; // seq-mean-token-mean: c = 1/n
        assert.ok(Math.abs(g - fd) <= 1e-5 * Math.max(1, Math.abs(fd)), `token ${k} of ${n}: ${g} vs ${fd}`);
        near(tokenLossGrad(loss, p[k], q[k], a, 0, L).loss, J(p), 1e-12);
        checked++;
      }
    }
  }
  assert.ok(checked > 500, `only ${checked} checked`);
});

let root: string, base: string;
before(async () => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), "agent-r1-gspo-"));
  base = path.join(root, "tiny");
  await initModel({ preset: "tiny", out: base, seed: 2 });
});
after(() => fs.rmSync(root, { recursive: true, force: true }));

/**
 * Step-like datums: a prompt (weight 0) then an action, one advantage per datum, and sampler logprobs
 * off the model's by a datum's shift: datum 0's ratio (e^0.03) is past the clip, the others inside it.
 */
function datums(lp: (number | null)[][], seqs: number[][]): Datum[] {
  const shift = [-0.03, 0, -0.001];
  return seqs.map((s, i) => {
    const n = s.length - 1,
      prompt = 4;
    const a = i % 2 ? -1.3 : 0.8;
    return {
      tokens: s.slice(0, -1),
      targetTokens: s.slice(1),
      weights: Array.from({ length: n }, (_, t) => (t >= prompt ? 1 : 0)),
      advantages: Array.from({ length: n }, (_, t) => (t >= prompt ? a : 0)),
      logprobs: Array.from({ length: n }, (_, t) => lp[i][t + 1]! + shift[i]),
    };
  });
}

test(
  "GSPO on both local engines: the same loss, clip fraction and gradients",
  { skip: ENGINES.length < 2 && "the native addon is not built" },
  async () => {
    const rng = new Rng(9);
    const seqs = [12, 9, 15].map((n) => Array.from({ length: n }, () => 3 + rng.int(200)));
    const out: { loss: number; clip?: number; grads: Map<string, Float64Array> }[] = [];
    for (const backend of ENGINES) {
      const e = await LocalEngine.load(base, { workers: 0, backend });
      try {
        const lp = await e.computeLogprobs(seqs);
        const ds = datums(lp, seqs);
        const res = await e.forwardBackward(ds, {
          type: "gspo",
          clipLow: 0.01,
          clipHigh: 0.01,
          aggregation: "seq-mean-token-mean",
        });
        const grads = gradients(e);
        // the C engine holds a tied embedding as the head, (H, V); TF.js as (V, H)
        const emb = grads.get("model.embed_tokens.weight");
        if (backend === "native" && emb && e.config.tieWordEmbeddings)
          grads.set("model.embed_tokens.weight", transpose(emb, e.config.hiddenSize, e.config.vocabSize));
        out.push({ loss: res.metrics.loss, clip: res.metrics.clipFraction, grads });
      } finally {
        await e.dispose();
      }
    }
    const [a, b] = out;
    near(a.loss, b.loss, 1e-5 * Math.max(1, Math.abs(a.loss)));
    assert.equal(a.clip, b.clip);
    assert.ok(a.clip! > 0 && a.clip! < 1, `the case clips some sequences, not all (${a.clip})`);
    for (const [name, g] of a.grads) {
      const h = b.grads.get(name)!;
      let G = 0,
        d = 0;
      g.forEach((x, i) => ((G = Math.max(G, Math.abs(x))), (d = Math.max(d, Math.abs(x - h[i])))));
      assert.ok(d <= 2e-4 * Math.max(G, 1e-6), `${name}: gradients differ by ${d} (scale ${G})`);
    }
  },
);
