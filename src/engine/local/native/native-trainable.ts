/**
 * The native decoder plus what training needs around it: the gradients its passes accumulate,
 * and AdamW with global-norm clipping, run by the addon's kernels on the parameters in place.
 * The same rules as the TF.js engine's Trainable (../tfjs/trainable.ts): a step whose gradient
 * is not finite is skipped (weights and moments unchanged, gradients dropped); weight decay
 * applies to matrices only; nothing accumulated means no step.
 *
 * Optimizer moments are saved in the TF.js engine's in-memory layout (matrices (in, out), the
 * embedding (V, H)), so either engine resumes the other's checkpoints.
 */
import { requireAddon, type Addon } from "../addon.js";
import type { HostTensor } from "../../../model/safetensors.js";
import { describeNonFinite, firstNonFinite } from "../../../model/finite-weights.js";
import type { AdamParams, OptimStepResult } from "../../types.js";
import { checkAdamParams } from "../../optim-params.js";
import { OPTIMIZER_FILE } from "../trainable-io.js";
import { ModelFormatError } from "../../../util/errors.js";
import { transpose, type NativeDecoder, type TrainedTensor } from "./decoder.js";

export class NativeTrainable {
  private m = new Map<string, Float32Array>();
  private v = new Map<string, Float32Array>();
  /** Set by passes that added gradients; cleared by a step or zeroGrad. */
  accumulated = false;
  step = 0;
  /** Training passes since the last optimizer step (their LoRA dropout seeds). */
  private passes = 0;
  private readonly addon: Addon;

  /**
   * `baseDir`: the directory of the base weights (a LoRA run saves adapters that point there; for
   * full weights, the directory they were read from).
   */
  constructor(
    readonly model: NativeDecoder,
    readonly baseDir = "",
  ) {
    this.addon = requireAddon();
  }

  get size(): number {
    return this.model.size;
  }

  hasGradients(): boolean {
    return this.accumulated;
  }

  /** Writes the accumulated gradients to `target`, tensor after tensor; whether there were any. */
  exportGradients(target: Float32Array): boolean {
    let o = 0;
    for (const { grad } of this.model.trainedTensors()) {
      target.set(grad, o);
      o += grad.length;
    }
    return this.hasGradients();
  }

  /** Sets the gradients to the sum of several replicas' exports (laid out as exportGradients writes them). */
  setGradientsFromSum(sources: Float32Array[]): void {
    let o = 0;
    for (const { grad } of this.model.trainedTensors()) {
      grad.fill(0);
      for (const s of sources) for (let i = 0; i < grad.length; i++) grad[i] += s[o + i];
      o += grad.length;
    }
    this.accumulated = true;
  }

  /** Nothing to free: the parameters are typed arrays the collector takes back. */
  dispose(): void {}

  /**
   * The seed of the next training pass's LoRA dropout masks: the optimizer step and the pass's
   * index since it, so a resumed run (its step restored) draws the masks the uninterrupted run would.
   */
  nextPassSeed(): number {
    return this.step * 65536 + (this.passes++ % 65536);
  }

  zeroGrad(): void {
    this.model.zeroGrad();
    this.accumulated = false;
  }

  optimStep(p: AdamParams): OptimStepResult {
    const { lr, beta1, beta2, eps, weightDecay: wd, gradClipNorm: clip } = checkAdamParams(p);
    if (!this.accumulated) return { gradNorm: 0, skipped: true, step: this.step };
    const params = this.model.trainedTensors();
    let sq = 0;
    for (const q of params) sq += this.addon.sumSquares(q.grad);
    const gradNorm = Math.sqrt(Math.fround(sq)); // float32, the precision of the second moment
    if (!Number.isFinite(gradNorm)) {
      this.zeroGrad();
      return { gradNorm, skipped: true, step: this.step };
    }
    this.step += 1;
    this.passes = 0;
    const scale = clip > 0 && gradNorm > clip ? clip / gradNorm : 1;
    const bc1 = 1 - Math.pow(beta1, this.step),
      bc2 = 1 - Math.pow(beta2, this.step);
    for (const q of params) {
      const w = q.data,
        n = w.length;
      const m = this.moment(this.m, q.name, n),
        v = this.moment(this.v, q.name, n);
      const decay = q.rank >= 2 ? wd : 0;
      // in place: the kernel reads each element's inputs before writing its outputs
      this.addon.adamwStep(w, q.grad, m, v, w, m, v, n, lr, beta1, beta2, eps, decay, bc1, bc2, scale);
    }
    this.zeroGrad();
    return { gradNorm, skipped: false, step: this.step };
  }

  private moment(store: Map<string, Float32Array>, name: string, n: number): Float32Array {
    let t = store.get(name);
    if (!t) store.set(name, (t = new Float32Array(n)));
    return t;
  }

  /**
   * Shape of a trained tensor's moments as saved, and whether they are transposed from memory:
   * parameters in the TF.js engine's in-memory layout (only the tied embedding differs: the
   * native engine holds it as the head (H, V), TF.js as (V, H)); adapters as held ((in, r), (r, out)).
   */
  private savedLayout(t: TrainedTensor): { shape: number[]; flip: boolean; rows: number; cols: number } {
    const p = this.model.params.get(t.name);
    if (!p) {
      const ad = this.model.adapters.get(t.name.replace(/\.lora_[AB]$/, ""))!;
      const r = this.model.lora!.spec.rank;
      const shape = t.name.endsWith(".lora_A") ? [ad.in, r] : [r, ad.out];
      return { shape, flip: false, rows: shape[0], cols: shape[1] };
    }
    const flip = p.name === "model.embed_tokens.weight" && p.transposed;
    return { shape: flip ? [p.shape[1], p.shape[0]] : p.shape.slice(), flip, rows: p.shape[0], cols: p.shape[1] };
  }

  /** Moments as host tensors named m.<tensor> / v.<tensor> (see savedLayout). */
  optimizerState(): Map<string, HostTensor> {
    const out = new Map<string, HostTensor>();
    const tensors = new Map(this.model.trainedTensors().map((t) => [t.name, t]));
    for (const [prefix, store] of [
      ["m.", this.m],
      ["v.", this.v],
    ] as const) {
      for (const [name, data] of store) {
        const l = this.savedLayout(tensors.get(name)!);
        out.set(prefix + name, { shape: l.shape, data: l.flip ? transpose(data, l.rows, l.cols) : data.slice() });
      }
    }
    return out;
  }

  loadOptimizerState(state: Map<string, HostTensor>, step: number): void {
    const m = new Map<string, Float32Array>(),
      v = new Map<string, Float32Array>();
    const tensors = new Map(this.model.trainedTensors().map((t) => [t.name, t]));
    for (const [key, host] of state) {
      const store = key.startsWith("m.") ? m : key.startsWith("v.") ? v : undefined;
      const t = tensors.get(key.slice(2));
      const l = t && this.savedLayout(t);
      if (!store || !t || host.shape.join() !== l!.shape.join())
        throw new Error(`optimizer state entry ${key} does not match the model`);
      const bad = firstNonFinite(host);
      if (bad >= 0 || (store === v && host.data.some((x) => x < 0)))
        throw new ModelFormatError(
          OPTIMIZER_FILE,
          key,
          `holds ${bad >= 0 ? describeNonFinite(host, bad) : "a negative second moment"}; the optimizer cannot resume from it`,
        );
      store.set(t.name, l!.flip ? transpose(host.data, host.shape[0], host.shape[1]) : host.data.slice());
    }
    this.m = m;
    this.v = v;
    this.step = step;
  }

  /** A cheap fingerprint of the weights (and adapters). */
  weightsChecksum(): number {
    let h = 0;
    const arrays = [
      ...[...this.model.params.values()].map((q) => q.data),
      ...[...this.model.adapters.values()].flatMap((a) => [a.a, a.b]),
    ];
    for (const d of arrays) {
      const bits = d instanceof Float32Array ? new Uint32Array(d.buffer, d.byteOffset, d.length) : d;
      for (let i = 0; i < bits.length; i++) h = (Math.imul(h, 31) + bits[i]) | 0;
    }
    return h >>> 0;
  }
}
