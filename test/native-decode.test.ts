/**
 * KV-cached decoding on the TF.js engine: teacher-forced one token at a time through the
 * cache, single rows and a padded batch of rows at different positions, against each other and
 * against the uncached forward pass.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { LocalEngine } from "../src/engine/local/local-engine.js";
import { disposeCache, type KVCache } from "../src/engine/local/tfjs/transformer.js";
import { tf } from "../src/engine/local/tfjs/tf-backend.js";
import { Rng } from "../src/util/rng.js";
import { assertClose, tinyModelFixture } from "./native-helpers.js";

const fx = tinyModelFixture("agent-r1-decode-", 3);

interface Decoded {
  /** Logits (V) of every position of the sequence from the uncached pass. */
  full: Float32Array[];
  /** The same, from prefilling `prefill` tokens then one token at a time through the cache. */
  cached: Float32Array[];
  /** Per row of the padded batch, the logits of its last step. */
  batched: Float32Array[];
}

const rows = (t: tf.Tensor): Float32Array[] => {
  const [n, V] = [t.shape[0], t.shape[t.rank - 1]];
  const d = t.dataSync();
  return Array.from({ length: n }, (_, i) => Float32Array.from(d.subarray(i * V, (i + 1) * V)));
};

async function decode(seq: number[], prefill: number): Promise<Decoded> {
  const e = await LocalEngine.load(fx.base, { workers: 0, backend: "tfjs" });
  try {
    const m = e.model;
    const logitsOf = (hidden: tf.Tensor3D) => m.inferenceLogits(hidden.reshape([-1, hidden.shape[2]]) as tf.Tensor2D);
    const full = tf.tidy(() => rows(logitsOf(m.forward(tf.tensor2d(seq, [1, seq.length], "int32")).hidden)));
    const cached: Float32Array[] = [];
    let cache: KVCache | undefined;
    {
      const out = m.forward(tf.tensor2d(seq.slice(0, prefill), [1, prefill], "int32"));
      cached.push(...tf.tidy(() => rows(logitsOf(out.hidden))));
      out.hidden.dispose();
      cache = out.cache;
    }
    for (let t = prefill; t < seq.length; t++) {
      const out = m.forward(tf.tensor2d([seq[t]], [1, 1], "int32"), cache);
      cached.push(...tf.tidy(() => rows(logitsOf(out.hidden))));
      out.hidden.dispose();
      disposeCache(cache);
      cache = out.cache;
    }
    disposeCache(cache);
    // Two rows in one padded cache, as the scheduler builds it: row 0 holds seq[0..S), row 1
    // seq[0..S-3) left-padded by 3 zero keys; both then decode their next token together at their
    // own positions, the padding masked. Each row's step must equal the uncached pass there.
    const S = seq.length - 1;
    const batched = tf.tidy(() => {
      const c0 = m.forward(tf.tensor2d(seq.slice(0, S), [1, S], "int32")).cache;
      const c1 = m.forward(tf.tensor2d(seq.slice(0, S - 3), [1, S - 3], "int32")).cache;
      const pad = (x: tf.Tensor4D) => tf.concat([tf.zeros([1, x.shape[1], 3, x.shape[3]]), x], 2) as tf.Tensor4D;
      const both: KVCache = {
        k: c0.k.map((k, i) => tf.concat([k, pad(c1.k[i])], 0) as tf.Tensor4D),
        v: c0.v.map((v, i) => tf.concat([v, pad(c1.v[i])], 0) as tf.Tensor4D),
        length: S,
      };
      const keyMask = tf.tensor2d(
        [...Array<number>(S + 1).fill(0), -1e9, -1e9, -1e9, ...Array<number>(S - 2).fill(0)],
        [2, S + 1],
      );
      const out = m.forward(tf.tensor2d([seq[S], seq[S - 3]], [2, 1], "int32"), both, {
        positions: [S, S - 3],
        keyMask,
      });
      return rows(logitsOf(out.hidden));
    });
    return { full, cached, batched };
  } finally {
    await e.dispose();
  }
}

test("KV-cached decoding on the TF.js engine: cached steps and a padded batch's rows equal the uncached pass", async () => {
  const rng = new Rng(12);
  const seq = Array.from({ length: 14 }, () => 3 + rng.int(200));
  const r = await decode(seq, 5);
  assert.equal(r.cached.length, seq.length);
  r.cached.forEach((c, i) => assertClose(c, r.full[i], 1e-4, `cached logits at position ${i}`));
  assertClose(r.batched[0], r.full[seq.length - 1], 1e-4, `batched row 0 (position ${seq.length - 1})`);
  assertClose(
    r.batched[1],
    r.full[seq.length - 4],
    1e-4,
    `batched row 1 (position ${seq.length - 4}, after 3 padded keys)`,
  );
});
