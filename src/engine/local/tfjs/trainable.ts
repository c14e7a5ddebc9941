/**
 * A transformer plus what training needs around it: gradient accumulation
 * across forwardBackward calls, and AdamW with global-norm clipping. A step
 * whose gradients are not finite is skipped: the weights and the moments stay
 * as they were and the accumulated gradients are dropped.
 *
 * AdamW here: m ← β1·m + (1-β1)·g, v ← β2·v + (1-β2)·g², w ← w - lr·(m̂/(√v̂ + ε) + wd·w)
 * with bias-corrected m̂, v̂ (Loshchilov & Hutter). Weight decay applies to
 * matrices only (rank ≥ 2), not to norms and biases.
 */
import { heapView, tf } from "./tf-backend.js";
import type { Transformer } from "./transformer.js";
import type { AdamParams, OptimStepResult } from "../../types.js";
import type { HostTensor } from "../../../model/safetensors.js";
import { adamwUpdate, squaredNorm, sumFlat } from "./train-ops.js";

export class Trainable {
  private grads = new Map<string, tf.Tensor>();
  private m = new Map<string, tf.Variable>();
  private v = new Map<string, tf.Variable>();
  step = 0;

  /** tf variable names (unique per process) → parameter names. */
  private readonly byVariable: Map<string, string>;

  constructor(readonly model: Transformer) {
    this.byVariable = new Map([...model.params].map(([name, v]) => [v.name, name]));
  }

  /** Adds gradients, keyed by tf variable name as `tf.variableGrads` returns them; takes ownership. */
  accumulate(grads: Record<string, tf.Tensor>): void {
    for (const [varName, g] of Object.entries(grads)) {
      const name = this.byVariable.get(varName);
      if (!name) throw new Error(`internal: gradient for unknown variable ${varName}`);
      const prev = this.grads.get(name);
      if (prev) {
        this.grads.set(name, prev.add(g));
        prev.dispose();
        g.dispose();
      } else this.grads.set(name, g);
    }
  }

  /** Floats in all parameters, the length of a flat gradient. */
  get size(): number {
    let n = 0;
    for (const v of this.model.params.values()) n += v.size;
    return n;
  }

  /** Writes the accumulated gradients, parameters in model order, into `target` (zeros where none); returns whether any existed. */
  exportGradients(target: Float32Array): boolean {
    let offset = 0;
    for (const [name, v] of this.model.params) {
      const g = this.grads.get(name);
      if (g) target.set(heapView(g), offset);
      else target.fill(0, offset, offset + v.size);
      offset += v.size;
    }
    return this.grads.size > 0;
  }

  /** Replaces the accumulated gradients by the sum of flat gradients, added in the order given. */
  setGradientsFromSum(sources: Float32Array[]): void {
    this.zeroGrad();
    let offset = 0;
    for (const [name, v] of this.model.params) {
      // Sources added left to right in float32, so every replica computes the same bits.
      const g = sumFlat(sources, offset, v.shape);
      this.grads.set(name, g);
      offset += v.size;
    }
  }

  /** A cheap fingerprint of the weights (for checking replicas stay identical). */
  weightsChecksum(): number {
    let h = 0;
    for (const v of this.model.params.values()) {
      const d = v.dataSync() as Float32Array;
      const bits = new Uint32Array(d.buffer, d.byteOffset, d.length);
      for (let i = 0; i < bits.length; i++) h = (Math.imul(h, 31) + bits[i]) | 0;
    }
    return h >>> 0;
  }

  hasGradients(): boolean {
    return this.grads.size > 0;
  }

  zeroGrad(): void {
    tf.dispose([...this.grads.values()]);
    this.grads.clear();
  }

  optimStep(p: AdamParams): OptimStepResult {
    const beta1 = p.beta1 ?? 0.9,
      beta2 = p.beta2 ?? 0.999,
      eps = p.eps ?? 1e-8;
    const wd = p.weightDecay ?? 0,
      clip = p.gradClipNorm ?? 0;
    // Nothing accumulated: nothing to apply, and the step does not count (Adam's bias correction).
    if (this.grads.size === 0) return { gradNorm: 0, skipped: true, step: this.step };
    // Rounded to float32, the precision of the second moment (which holds g²): a squared norm past
    // float32's range makes the step non-finite even when a double sum could still hold it.
    const gradNorm = Math.sqrt(Math.fround(squaredNorm([...this.grads.values()])));
    if (!Number.isFinite(gradNorm)) {
      this.zeroGrad();
      return { gradNorm, skipped: true, step: this.step };
    }
    this.step += 1;
    const scale = clip > 0 && gradNorm > clip ? clip / gradNorm : 1;
    const bc1 = 1 - Math.pow(beta1, this.step),
      bc2 = 1 - Math.pow(beta2, this.step);
    for (const [name, w] of this.model.params) {
      const g = this.grads.get(name);
      if (!g) continue;
      const m = this.moment(this.m, name, w),
        v = this.moment(this.v, name, w);
      const h = { lr: p.lr, beta1, beta2, eps, weightDecay: w.rank >= 2 ? wd : 0, bc1, bc2, gradScale: scale };
      const next = adamwUpdate(w, g, m, v, h);
      w.assign(next[0]);
      m.assign(next[1]);
      v.assign(next[2]);
      tf.dispose(next);
    }
    this.zeroGrad();
    this.model.weightsChanged();
    return { gradNorm, skipped: false, step: this.step };
  }

  private moment(store: Map<string, tf.Variable>, name: string, like: tf.Tensor): tf.Variable {
    let t = store.get(name);
    if (!t) {
      // The variable shares the zeros' data; disposing them here lets the first assign free it (else 2x the weights leak).
      const zeros = tf.zerosLike(like);
      t = tf.variable(zeros, false);
      zeros.dispose();
      store.set(name, t);
    }
    return t;
  }

  /** Optimizer moments as host tensors (in-memory layout), named m.<param> / v.<param>. */
  optimizerState(): Map<string, HostTensor> {
    const out = new Map<string, HostTensor>();
    for (const [prefix, store] of [
      ["m.", this.m],
      ["v.", this.v],
    ] as const) {
      for (const [name, t] of store)
        out.set(prefix + name, { shape: t.shape.slice(), data: t.dataSync() as Float32Array });
    }
    return out;
  }

  loadOptimizerState(state: Map<string, HostTensor>, step: number): void {
    this.disposeMoments();
    for (const [key, host] of state) {
      const store = key.startsWith("m.") ? this.m : key.startsWith("v.") ? this.v : undefined;
      const name = key.slice(2);
      const w = this.model.params.get(name);
      if (!store || !w || host.shape.join() !== w.shape.join())
        throw new Error(`optimizer state entry ${key} does not match the model`);
      const data = tf.tensor(host.data, host.shape);
      store.set(name, tf.variable(data, false));
      data.dispose(); // as in moment(): the variable keeps the data alive until its first assign
    }
    this.step = step;
  }

  private disposeMoments(): void {
    tf.dispose([...this.m.values(), ...this.v.values()]);
    this.m.clear();
    this.v.clear();
  }

  dispose(): void {
    this.zeroGrad();
    this.disposeMoments();
    this.model.dispose();
  }
}
