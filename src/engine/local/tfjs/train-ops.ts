/**
 * Training ops of the TF.js engine on the addon's kernels, each a custom TF.js kernel for the
 * wasm backend over a C kernel of the addon (native/train_ops.c):
 *  - tokenLogprobs: the policy loss's log-softmax of the logits, the target's entry and the
 *    entropy, one pass over the (rows, vocab) logits, with a paired backward kernel;
 *  - adamwUpdate: AdamW's element-wise update of one parameter and its moments, one pass;
 *  - squaredNorm: Σ g² of a gradient, accumulated in double;
 *  - sumFlat: the replicas' flat gradients summed straight into a heap tensor;
 *  - addInPlace: a micro-batch's gradient added into the accumulated one without a new buffer.
 * As in ./fused-ops.ts, each runs its kernel when `fusedOpsActive()`, else the TF.js
 * composition it replaces, which stays the reference the tests compare against.
 */
import { fusedOpsActive, heapView, tf, type TensorInfo, type WasmBackend } from "./tf-backend.js";
import {
  addon,
  lastDim,
  registerWasmKernels,
  requireFloat32,
  runKernel,
  sizeOf,
  withOutputs,
  type Args,
} from "./fused-ops.js";

export const TRAIN_KERNELS = {
  tokenLogprobs: "AgentR1TokenLogprobs",
  tokenLogprobsGrad: "AgentR1TokenLogprobsGrad",
  adamw: "AgentR1AdamW",
  sumFlat: "AgentR1SumFlat",
} as const;
const K = TRAIN_KERNELS;

/**
 * Per-token log-probabilities (N) of `targets` (N) under softmax(logits / temperature),
 * logits (N, V), and the entropies (N) of those distributions. Differentiable in logits
 * through both outputs.
 */
export function tokenLogprobs(
  logits: tf.Tensor2D,
  targets: Int32Array,
  temperature: number,
): { picked: tf.Tensor1D; entropy: tf.Tensor1D } {
  const [N, V] = logits.shape;
  if (targets.length !== N) throw new Error(`tokenLogprobs: ${targets.length} targets for ${N} rows of logits`);
  if (fusedOpsActive() && logits.dtype === "float32") {
    const [picked, entropy] = run(
      K.tokenLogprobs,
      { logits, targets: tf.tensor1d(targets, "int32") },
      { temperature },
    ) as tf.Tensor1D[];
    return { picked, entropy };
  }
  const scaled = temperature === 1 ? logits : logits.div(temperature);
  const logp = tf.logSoftmax(scaled, -1); // (N, V)
  const flat = new Int32Array(N);
  for (let i = 0; i < N; i++) flat[i] = i * V + targets[i];
  const picked = tf.gather(logp.reshape([N * V]), tf.tensor1d(flat, "int32")) as tf.Tensor1D; // (N)
  const entropy = logp.exp().mul(logp).sum(-1).neg() as tf.Tensor1D; // (N)
  return { picked, entropy };
}

/** AdamW's hyperparameters for one step, with the bias corrections and the clipping scale. */
export interface AdamWStep {
  lr: number;
  beta1: number;
  beta2: number;
  eps: number;
  /** 0 for parameters that are not decayed. */
  weightDecay: number;
  /** 1 - beta1^t and 1 - beta2^t. */
  bc1: number;
  bc2: number;
  /** Gradient scale from global-norm clipping (1 = none). */
  gradScale: number;
}

/**
 * One AdamW update of w with gradient g and moments m, v (one shape): returns the new
 * [w, m, v]. TF.js composition: m' = m·β1 + g·(1-β1), v' = v·β2 + g²·(1-β2),
 * w' = w - lr·((m'/bc1) / (sqrt(v'/bc2) + ε) + wd·w), with g scaled first.
 */
export function adamwUpdate(
  w: tf.Tensor,
  g0: tf.Tensor,
  m: tf.Tensor,
  v: tf.Tensor,
  h: AdamWStep,
): [tf.Tensor, tf.Tensor, tf.Tensor] {
  if (fusedOpsActive() && [w, g0, m, v].every((t) => t.dtype === "float32")) {
    return run(K.adamw, { w, g: g0, m, v }, { ...h }) as [tf.Tensor, tf.Tensor, tf.Tensor];
  }
  return tf.tidy(() => {
    const g = h.gradScale === 1 ? g0 : g0.mul(h.gradScale);
    const m2 = m.mul(h.beta1).add(g.mul(1 - h.beta1));
    const v2 = v.mul(h.beta2).add(g.square().mul(1 - h.beta2));
    let update = m2.div(h.bc1).div(v2.div(h.bc2).sqrt().add(h.eps));
    if (h.weightDecay > 0) update = update.add(w.mul(h.weightDecay));
    return [w.sub(update.mul(h.lr)), m2, v2] as [tf.Tensor, tf.Tensor, tf.Tensor];
  });
}

/** Σ over tensors of Σ t² (the squared global norm): in double natively, else TF.js's float32 sums. */
export function squaredNorm(ts: tf.Tensor[]): number {
  if (fusedOpsActive() && ts.every((t) => t.dtype === "float32")) {
    let s = 0;
    for (const t of ts) s += addon().sumSquares(heapView(t));
    return s;
  }
  const sq = tf.tidy(() => tf.addN(ts.map((g) => g.square().sum())));
  const out = sq.dataSync()[0];
  sq.dispose();
  return out;
}

/**
 * A float32 tensor of `shape` holding Σ_s sources[s][offset .. offset + size), added left to right
 * in float32 (the replicas' flat gradients). Natively it is written straight into the heap.
 */
export function sumFlat(sources: Float32Array[], offset: number, shape: number[]): tf.Tensor {
  const size = sizeOf(shape);
  if (fusedOpsActive()) return run(K.sumFlat, {}, { shape, offset, sources }) as tf.Tensor;
  const sum = sources[0].slice(offset, offset + size);
  for (const src of sources.slice(1)) for (let i = 0, j = offset; i < size; i++, j++) sum[i] += src[j];
  return tf.tensor(sum, shape);
}

/**
 * target += src in place (float32, the same bits as TF.js's Add) when the native kernels are on and
 * target's buffer belongs to it alone; returns false, changing nothing, otherwise.
 */
export function addInPlace(target: tf.Tensor, src: tf.Tensor): boolean {
  if (!fusedOpsActive() || target.dtype !== "float32" || src.dtype !== "float32" || target.size !== src.size)
    return false;
  const backend = tf.backend() as unknown as { refCount(dataId: object): number };
  if (backend.refCount(target.dataId) !== 1) return false;
  addon().addInto(heapView(target), heapView(src), 0);
  return true;
}

// ---------------------------------------------------------------------------
// Kernels and gradients
// ---------------------------------------------------------------------------

function run(name: string, inputs: Record<string, tf.Tensor>, attrs: Record<string, unknown>): tf.Tensor | tf.Tensor[] {
  registerTrainKernels();
  return runKernel(name, inputs, attrs);
}

const i32 = (backend: WasmBackend, t: TensorInfo) => backend.typedArrayFromHeap(t) as Int32Array;

/** logits (N, V), targets (N) int32 → [picked (N), entropy (N), stats (N, 2)]. */
function tokenLogprobsKernel({ inputs, backend, attrs }: Args): TensorInfo[] {
  const { logits, targets } = inputs;
  requireFloat32(K.tokenLogprobs, { logits });
  if (targets.dtype !== "int32") throw new Error(`${K.tokenLogprobs}: targets must be int32, got ${targets.dtype}`);
  const V = lastDim(logits),
    N = V ? sizeOf(logits.shape) / V : 0;
  return withOutputs(backend, [logits], [[N], [N], [N, 2]], ([lv], [pv, ev, sv]) =>
    addon().tokenLogprobsForward(lv, i32(backend, targets), pv, ev, sv, N, V, attrs!.temperature as number),
  );
}

/** logits (N, V), targets (N), stats (N, 2), entropy (N), dpicked (N), dentropy (N) → dlogits (N, V). */
function tokenLogprobsGradKernel({ inputs, backend, attrs }: Args): TensorInfo {
  const { logits, targets, stats, entropy, dpicked, dentropy } = inputs;
  requireFloat32(K.tokenLogprobsGrad, { logits, stats, entropy, dpicked, dentropy });
  const V = lastDim(logits),
    N = V ? sizeOf(logits.shape) / V : 0;
  return withOutputs(
    backend,
    [logits, stats, entropy, dpicked, dentropy],
    [logits.shape],
    ([lv, sv, ev, dpv, dev], [dxv]) =>
      addon().tokenLogprobsBackward(
        lv,
        i32(backend, targets),
        sv,
        ev,
        dpv,
        dev,
        dxv,
        N,
        V,
        attrs!.temperature as number,
      ),
  )[0];
}

/** w, g, m, v (n) → [w', m', v'] (n). */
function adamwKernel({ inputs, backend, attrs }: Args): TensorInfo[] {
  const { w, g, m, v } = inputs;
  requireFloat32(K.adamw, inputs);
  const h = attrs as unknown as AdamWStep,
    n = sizeOf(w.shape);
  return withOutputs(backend, [w, g, m, v], [w.shape, w.shape, w.shape], ([wv, gv, mv, vv], [wo, mo, vo]) =>
    addon().adamwStep(
      wv,
      gv,
      mv,
      vv,
      wo,
      mo,
      vo,
      n,
      h.lr,
      h.beta1,
      h.beta2,
      h.eps,
      h.weightDecay,
      h.bc1,
      h.bc2,
      h.gradScale,
    ),
  );
}

/** No inputs; attrs shape, offset, sources → the sum of the sources' slices, of that shape. */
function sumFlatKernel({ backend, attrs }: Args): TensorInfo {
  const { shape, offset, sources } = attrs as unknown as { shape: number[]; offset: number; sources: Float32Array[] };
  const size = sizeOf(shape);
  return withOutputs(backend, [], [shape], (_, [out]) => {
    out.set(sources[0].subarray(offset, offset + size));
    for (const src of sources.slice(1)) addon().addInto(out, src, offset);
  })[0];
}

let registered = false;

function registerTrainKernels(): void {
  if (registered) return;
  registered = true;
  registerWasmKernels([
    [K.tokenLogprobs, tokenLogprobsKernel],
    [K.tokenLogprobsGrad, tokenLogprobsGradKernel],
    [K.adamw, adamwKernel],
    [K.sumFlat, sumFlatKernel],
  ]);
  tf.registerGradient({
    kernelName: K.tokenLogprobs,
    inputsToSave: ["logits", "targets"],
    outputsToSave: [false, true, true],
    gradFunc: (dys, saved, attrs) => {
      const [logits, targets, entropy, stats] = saved;
      const [dpicked, dentropy] = dys as tf.Tensor[];
      const dx = run(
        K.tokenLogprobsGrad,
        { logits, targets, stats, entropy, dpicked, dentropy },
        { temperature: (attrs as { temperature: number }).temperature },
      ) as tf.Tensor;
      return { logits: () => dx, targets: () => tf.zerosLike(targets) };
    },
  });
}
