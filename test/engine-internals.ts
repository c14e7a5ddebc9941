/**
 * What the engine tests reach inside a single-replica LocalEngine, on either engine (TF.js or
 * native), so the same tests run on both: weights and moments as host tensors, the accumulated
 * gradients and the parameters in the engine's own layout, and weight sharpening.
 */
import { tf } from "../src/engine/local/tfjs/tf-backend.js";
import { loadAddon } from "../src/engine/local/addon.js";
import type { LocalEngine } from "../src/engine/local/local-engine.js";
import { toFloat32, type HostTensor } from "../src/model/safetensors.js";

/** The engines this machine runs: TF.js always, native where the addon loads. */
export const ENGINES = (loadAddon().ok ? ["tfjs", "native"] : ["tfjs"]) as ("tfjs" | "native")[];

interface TfInternals {
  trainable: { grads: Map<string, tf.Tensor> };
}
const tfGrads = (e: LocalEngine) => (e as unknown as TfInternals).trainable.grads;

/** Weights in Hugging Face names and layout. */
export function weights(e: LocalEngine): Map<string, HostTensor> {
  if (e.backend === "tfjs") return e.model.toHostWeights();
  const raw = e.nativeTrainable.model.toHostWeights();
  return new Map([...raw].map(([n, t]) => [n, { shape: t.shape, data: toFloat32(t) }]));
}

export function optimizerState(e: LocalEngine): Map<string, HostTensor> {
  return e.backend === "native" ? e.nativeTrainable.optimizerState() : e.trainable.optimizerState();
}

/** Parameters in the engine's own layout (the same as gradients'), with their rank. */
export function paramValues(e: LocalEngine): Map<string, { data: Float64Array; rank: number }> {
  if (e.backend === "native")
    return new Map(
      [...e.nativeTrainable.model.params].map(([n, p]) => [
        n,
        { data: Float64Array.from(p.data as Float32Array), rank: p.shape.length },
      ]),
    );
  return new Map([...e.model.params].map(([n, v]) => [n, { data: Float64Array.from(v.dataSync()), rank: v.rank }]));
}

/** The accumulated gradients in the engine's own layout (empty when none). */
export function gradients(e: LocalEngine): Map<string, Float64Array> {
  if (e.backend === "native") {
    const t = e.nativeTrainable;
    if (!t.hasGradients()) return new Map();
    return new Map([...t.model.params].flatMap(([n, p]) => (p.grad ? [[n, Float64Array.from(p.grad)]] : [])));
  }
  return new Map([...tfGrads(e)].map(([n, t]) => [n, Float64Array.from(t.dataSync())]));
}

export function hasGradients(e: LocalEngine): boolean {
  return e.backend === "native" ? e.nativeTrainable.hasGradients() : tfGrads(e).size > 0;
}

/** Writes NaN into entry i of a parameter's accumulated gradient. */
export function poisonGradient(e: LocalEngine, name: string, i: number): void {
  if (e.backend === "native") {
    e.nativeTrainable.model.params.get(name)!.grad![i] = NaN;
    return;
  }
  const grads = tfGrads(e);
  const g = grads.get(name)!;
  const data = Float32Array.from(g.dataSync() as Float32Array);
  data[i] = NaN;
  grads.set(name, tf.tensor(data, g.shape));
  g.dispose();
}

/**
 * Scales the embedding and every projection so that attention and the next-token distribution
 * are far from uniform (the 0.02 init makes almost every logit the same, which would make
 * comparisons weak).
 */
export function sharpen(e: LocalEngine, factor = 6): void {
  const scaled = (name: string) => name.endsWith("_proj.weight") || name === "model.embed_tokens.weight";
  if (e.backend === "native") {
    for (const [name, p] of e.nativeTrainable.model.params) {
      if (!scaled(name)) continue;
      const d = p.data as Float32Array;
      for (let i = 0; i < d.length; i++) d[i] *= factor;
    }
    return;
  }
  for (const [name, v] of e.model.params) if (scaled(name)) tf.tidy(() => v.assign(v.mul(factor)));
}
