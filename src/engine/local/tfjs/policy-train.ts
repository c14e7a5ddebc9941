/**
 * forwardBackward and computeLogprobs for the policy on tensors. Datums are
 * packed into micro-batches (right-padded; causal attention keeps padding from
 * touching real positions) and the loss is Σ c·l with the aggregation
 * coefficients c of the whole call, so micro-batches add up exactly.
 */
import { tf } from "./tf-backend.js";
import type { Trainable } from "./trainable.js";
import type { Transformer } from "./transformer.js";
import type { Datum, ForwardBackwardResult } from "../../types.js";
import { aggregationCoefficients } from "../../../rl/aggregation.js";
import { KL_CLAMP } from "../../../rl/kl.js";
import { summarizeForwardBackward } from "../../../rl/loss-metrics.js";
import { LOG_RATIO_CLAMP, SEQ_LOG_RATIO_CLAMP, sequenceLogRatio, type ResolvedLoss } from "../../../rl/policy-loss.js";
import { padRows, padTokenRows } from "./padding.js";
import { toPlanner, type MicroBatchPlanner } from "../../micro-batches.js";
import { tokenLogprobs } from "./train-ops.js";
import type { RawForwardBackward } from "../replica-api.js";

/**
 * Accumulates the gradient of Σ c·l over `datums` into `tr`. `coef` are the
 * aggregation coefficients of the whole call (computed here when omitted), so
 * a call split across micro-batches or replicas adds up to the same loss.
 */
export function policyPass(
  tr: Trainable,
  datums: Datum[],
  loss: ResolvedLoss,
  plan: number | MicroBatchPlanner,
  coef?: number[][],
): RawForwardBackward {
  const model = tr.model;
  coef ??= aggregationCoefficients(datums, loss.aggregation, loss.normalizer);
  const logprobs: number[][] = new Array(datums.length);
  let lossSum = 0,
    entropySum = 0;
  const vars = [...model.params.values()];
  for (const idx of toPlanner(plan)(datums.map((d) => d.tokens.length))) {
    const group = idx.map((i) => datums[i]);
    const B = group.length,
      T = Math.max(...group.map((d) => d.tokens.length)),
      N = B * T;
    const tokens = padTokenRows(
      group.map((d) => d.tokens),
      T,
    );
    const targets = padTokenRows(
      group.map((d) => d.targetTokens),
      T,
    );
    const c = padRows(
      idx.map((i) => coef![i]),
      T,
    );
    const q = padRows(
      group.map((d) => d.logprobs ?? []),
      T,
    );
    const a = padRows(
      group.map((d) => d.advantages ?? []),
      T,
    );
    const ref = padRows(
      group.map((d) => d.refLogprobs ?? []),
      T,
    );
    const w = padRows(
      group.map((d) => d.weights),
      T,
    );
    let picked: tf.Tensor1D | undefined, entropy: tf.Tensor1D | undefined;
    const { value, grads } = tf.variableGrads(() => {
      const { hidden } = model.forward(tf.tensor2d(tokens, [B, T], "int32"));
      const res = tokenLogprobs(model.logits(hidden.reshape([N, -1]) as tf.Tensor2D), targets, loss.temperature);
      picked = tf.keep(res.picked);
      entropy = tf.keep(res.entropy);
      const pv = loss.type === "gspo" ? (res.picked.dataSync() as Float32Array) : undefined;
      const gspo = pv && { p: pv, seq: rowLogRatios(pv, q, w, T) };
      const perToken = tokenLossTensor(res.picked, loss, q, a, ref, gspo);
      return perToken.mul(tf.tensor1d(c)).sum() as tf.Scalar;
    }, vars);
    lossSum += value.dataSync()[0];
    value.dispose();
    tr.accumulate(grads as Record<string, tf.Tensor>);
    const p = picked!.dataSync(),
      ent = entropy!.dataSync();
    tf.dispose([picked!, entropy!]);
    group.forEach((d, b) => {
      logprobs[idx[b]] = Array.from(p.subarray(b * T, b * T + d.tokens.length));
      for (let t = 0; t < d.tokens.length; t++) entropySum += d.weights[t] > 0 ? ent[b * T + t] : 0;
    });
  }
  return { logprobs, lossSum, entropySum };
}

/** forwardBackward on one in-process model: the pass plus its metrics. */
export function policyForwardBackward(
  tr: Trainable,
  datums: Datum[],
  loss: ResolvedLoss,
  plan: number | MicroBatchPlanner,
): ForwardBackwardResult {
  const raw = policyPass(tr, datums, loss, plan);
  return summarizeForwardBackward(datums, loss, raw.logprobs, raw.lossSum, raw.entropySum);
}

/** GSPO's sequence log-ratio of each padded row (rl/policy-loss.ts sequenceLogRatio), at every position of the row. */
function rowLogRatios(p: Float32Array, q: Float32Array, w: Float32Array, T: number): Float32Array {
  const out = new Float32Array(p.length);
  for (let r0 = 0; r0 < p.length; r0 += T) {
    const row = sequenceLogRatio(
      (t) => p[r0 + t],
      Array.from(q.subarray(r0, r0 + T)),
      Array.from(w.subarray(r0, r0 + T)),
    );
    out.fill(row, r0, r0 + T);
  }
  return out;
}

/**
 * GSPO-token's ratio: value s = exp(clamped sequence log-ratio), derivative s in the token's own p
 * (0 where the clamp holds): s + (p − p's value)·s, with the values entering as constants.
 */
function gspoRatio(p: tf.Tensor1D, pv: Float32Array, seq: Float32Array): tf.Tensor1D {
  const s = new Float32Array(seq.length),
    slope = new Float32Array(seq.length);
  seq.forEach((lr, i) => {
    s[i] = Math.exp(Math.max(-SEQ_LOG_RATIO_CLAMP, Math.min(SEQ_LOG_RATIO_CLAMP, lr)));
    slope[i] = Math.abs(lr) <= SEQ_LOG_RATIO_CLAMP ? s[i] : 0;
  });
  return p.sub(tf.tensor1d(pv)).mul(tf.tensor1d(slope)).add(tf.tensor1d(s)) as tf.Tensor1D;
}

/** The per-token loss of rl/policy-loss.ts and rl/kl.ts, on tensors; differentiable in p. Constants are padded (N) arrays. */
function tokenLossTensor(
  p: tf.Tensor1D,
  loss: ResolvedLoss,
  q: Float32Array,
  a: Float32Array,
  ref: Float32Array,
  gspo?: { p: Float32Array; seq: Float32Array },
): tf.Tensor1D {
  let l: tf.Tensor1D;
  if (loss.type === "cross_entropy") l = p.neg();
  else if (loss.type === "dro") {
    const d = p.sub(tf.tensor1d(q));
    l = p
      .mul(tf.tensor1d(a))
      .sub(d.square().mul(0.5 * loss.beta))
      .neg() as tf.Tensor1D;
  } else if (loss.type === "cispo") l = cispoTensor(p, loss, q, a);
  else {
    const A = tf.tensor1d(a);
    const r =
      loss.type === "gspo"
        ? gspoRatio(p, gspo!.p, gspo!.seq)
        : p.sub(tf.tensor1d(q)).clipByValue(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP).exp();
    if (loss.type === "importance_sampling") l = r.mul(A).neg() as tf.Tensor1D;
    else {
      const unclipped = r.mul(A).neg();
      const clipped = r
        .clipByValue(1 - loss.clipLow, 1 + loss.clipHigh)
        .mul(A)
        .neg();
      l = tf.maximum(unclipped, clipped);
      if (loss.dualClip > 0) {
        // Masks come from constants, outside the gradient path.
        const neg = new Float32Array(a.length),
          cap = new Float32Array(a.length);
        a.forEach((x, i) => {
          neg[i] = x < 0 ? 1 : 0;
          cap[i] = x < 0 ? -x * loss.dualClip : 0;
        });
        const negT = tf.tensor1d(neg);
        l = tf
          .minimum(l, tf.tensor1d(cap))
          .mul(negT)
          .add(l.mul(tf.scalar(1).sub(negT)));
      }
    }
  }
  if (loss.kl) l = l.add(klTensor(p, tf.tensor1d(ref), loss.kl.form).mul(loss.kl.coef));
  return l;
}

/**
 * CISPO: −sg(clip(r))·p·A. The clipped ratio is read off p's values and enters as a constant,
 * which is the stop-gradient: the gradient is −clip(r)·A on every token.
 */
function cispoTensor(p: tf.Tensor1D, loss: ResolvedLoss, q: Float32Array, a: Float32Array): tf.Tensor1D {
  const pv = p.dataSync();
  const w = new Float32Array(pv.length);
  for (let i = 0; i < w.length; i++) {
    const r = Math.exp(Math.max(-LOG_RATIO_CLAMP, Math.min(LOG_RATIO_CLAMP, pv[i] - q[i])));
    w[i] = Math.max(1 - loss.clipLow, Math.min(1 + loss.clipHigh, r));
  }
  return p.mul(tf.tensor1d(w)).mul(tf.tensor1d(a)).neg() as tf.Tensor1D;
}

function klTensor(p: tf.Tensor1D, ref: tf.Tensor1D, form: "k1" | "k2" | "k3"): tf.Tensor1D {
  if (form === "k1") return p.sub(ref);
  if (form === "k2") return p.sub(ref).square().mul(0.5);
  const d = ref.sub(p).clipByValue(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP);
  return d.exp().sub(d).sub(1).clipByValue(-KL_CLAMP, KL_CLAMP) as tf.Tensor1D;
}

/** Logprobs of each token given the ones before it (entry 0 null), batched by the token budget. */
export function computeLogprobs(
  model: Transformer,
  sequences: number[][],
  temperature: number,
  plan: number | MicroBatchPlanner,
): (number | null)[][] {
  const out: (number | null)[][] = new Array(sequences.length);
  for (const idx of toPlanner(plan)(sequences.map((s) => s.length))) {
    const group = idx.map((i) => sequences[i]);
    const B = group.length,
      T = Math.max(...group.map((s) => s.length)),
      N = B * T;
    const tokens = padTokenRows(group, T);
    const targets = new Int32Array(N);
    group.forEach((s, b) => s.forEach((tok, t) => t > 0 && (targets[b * T + t - 1] = tok)));
    const p = tf.tidy(() => {
      const { hidden } = model.forward(tf.tensor2d(tokens, [B, T], "int32"));
      return tokenLogprobs(model.inferenceLogits(hidden.reshape([N, -1]) as tf.Tensor2D), targets, temperature).picked;
    });
    const data = p.dataSync();
    p.dispose();
    group.forEach((s, b) => {
      out[idx[b]] = [null, ...Array.from(data.subarray(b * T, b * T + s.length - 1))];
    });
  }
  return out;
}
