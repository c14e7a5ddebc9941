/**
 * The critic for PPO with GAE: the decoder with a scalar value head
 * (`score.weight`, as in Hugging Face's token-classification heads) on its own
 * weights and optimizer. Value loss (clipped, as in PPO implementations):
 *   ½ · mean over weighted positions of max((V - R)², (clip(V, V_old - ε, V_old + ε) - R)²)
 */
import { tf } from "./tf-backend.js";
import { Trainable } from "./trainable.js";
import { loadTrainableState, saveTrainable } from "./trainable-io.js";
import { Transformer } from "../../model/transformer.js";
import { loadModelDir } from "../../model/model-dir.js";
import type { Tokenizer } from "../../model/tokenizer.js";
import type { MicroBatchPlanner } from "../micro-batches.js";
import type { AdamParams, Critic, OptimStepResult, ValueDatum } from "../types.js";
import { InputError } from "../../util/errors.js";
import { assertFinite, assertTokens } from "../validate.js";
import { join } from "node:path";

export class LocalCritic implements Critic {
  private trainable: Trainable;

  constructor(model: Transformer, readonly tokenizer: Tokenizer, private sourceDir: string, private plan: MicroBatchPlanner) {
    this.trainable = new Trainable(model);
  }

  private run(tokens: Int32Array, B: number, T: number): tf.Tensor1D {
    const m = this.trainable.model;
    const { hidden } = m.forward(tf.tensor2d(tokens, [B, T], "int32"));
    return m.values(hidden.reshape([B * T, -1]) as tf.Tensor2D); // (B*T)
  }

  async values(sequences: number[][]): Promise<number[][]> {
    const V = this.trainable.model.config.vocabSize;
    sequences.forEach((s, i) => assertTokens(s, V, `sequence ${i}`));
    const out: number[][] = new Array(sequences.length);
    for (const idx of this.plan(sequences.map((s) => s.length))) {
      const group = idx.map((i) => sequences[i]);
      const B = group.length, T = Math.max(...group.map((s) => s.length));
      const v = tf.tidy(() => this.run(padInt(group, T), B, T));
      const data = v.dataSync();
      v.dispose();
      group.forEach((s, b) => (out[idx[b]] = Array.from(data.subarray(b * T, b * T + s.length))));
    }
    return out;
  }

  async forwardBackward(datums: ValueDatum[], opts: { clip?: number } = {}) {
    const clip = opts.clip ?? 0;
    const vocab = this.trainable.model.config.vocabSize;
    datums.forEach((d, i) => {
      assertTokens(d.tokens, vocab, `value datum ${i} tokens`);
      for (const k of ["weights", "returns", "oldValues"] as const) if (d[k]) assertFinite(d[k]!, `value datum ${i}: ${k}`);
      for (const k of ["weights", "returns"] as const) {
        if (d[k].length !== d.tokens.length) throw new InputError(`value datum ${i}: ${k} has length ${d[k].length}, tokens has ${d.tokens.length}`);
      }
      if (clip > 0 && d.oldValues?.length !== d.tokens.length) throw new InputError(`value datum ${i}: oldValues is required (same length as tokens) when clip > 0`);
    });
    const total = datums.reduce((s, d) => s + d.weights.reduce((a, w) => a + w, 0), 0);
    const values: number[][] = new Array(datums.length);
    let loss = 0, clipped = 0, n = 0;
    for (const idx of this.plan(datums.map((d) => d.tokens.length))) {
      const group = idx.map((i) => datums[i]);
      const B = group.length, T = Math.max(...group.map((d) => d.tokens.length));
      const w = padFloat(group.map((d) => d.weights.map((x) => x / Math.max(total, 1e-12))), T);
      const R = padFloat(group.map((d) => d.returns), T);
      const old = padFloat(group.map((d) => d.oldValues ?? []), T);
      let kept: tf.Tensor1D | undefined;
      const { value, grads } = tf.variableGrads(() => {
        const V = this.run(padInt(group.map((d) => d.tokens), T), B, T);
        kept = tf.keep(V);
        const Rt = tf.tensor1d(R);
        let sq = V.sub(Rt).square();
        if (clip > 0) {
          const oldT = tf.tensor1d(old);
          const Vc = oldT.add(V.sub(oldT).clipByValue(-clip, clip));
          sq = tf.maximum(sq, Vc.sub(Rt).square());
        }
        return sq.mul(tf.tensor1d(w)).sum().mul(0.5) as tf.Scalar;
      }, [...this.trainable.model.params.values()]);
      loss += value.dataSync()[0];
      value.dispose();
      this.trainable.accumulate(grads as Record<string, tf.Tensor>);
      const v = kept!.dataSync();
      kept!.dispose();
      group.forEach((d, b) => {
        values[idx[b]] = Array.from(v.subarray(b * T, b * T + d.tokens.length));
        d.weights.forEach((wt, t) => {
          if (wt <= 0) return;
          n++;
          if (clip > 0 && Math.abs(values[idx[b]][t] - d.oldValues![t]) > clip) clipped++;
        });
      });
    }
    return { values, metrics: { loss, tokens: n, clipFraction: n ? clipped / n : 0 } };
  }

  async optimStep(params: AdamParams): Promise<OptimStepResult> {
    return this.trainable.optimStep(params);
  }

  async save(dir: string): Promise<void> {
    saveTrainable(this.trainable, dir, this.sourceDir);
  }

  async load(dir: string): Promise<void> {
    const m = loadModelDir(dir);
    const model = Transformer.fromHostWeights(m.config, m.weights, join(dir, "model.safetensors"), "value");
    this.trainable.dispose();
    this.trainable = new Trainable(model);
    this.sourceDir = dir;
    loadTrainableState(this.trainable, dir);
  }

  dispose(): void {
    this.trainable.dispose();
  }
}

function padInt(rows: number[][], T: number): Int32Array {
  const out = new Int32Array(rows.length * T);
  rows.forEach((r, b) => out.set(r, b * T));
  return out;
}

function padFloat(rows: number[][], T: number): Float32Array {
  const out = new Float32Array(rows.length * T);
  rows.forEach((r, b) => out.set(r, b * T));
  return out;
}
