/**
 * Fused element-wise ops of the TF.js decoder (./transformer.ts), for the TF.js engine on the
 * addon's kernels: RMSNorm, the rotary embedding, the attention softmax (scale + additive mask +
 * softmax), SwiGLU and the q/k/v bias add, each a custom TF.js kernel for the wasm backend that
 * calls a C kernel of the addon (native/fused_ops.c) on views of the wasm heap, with an explicit
 * backward kernel registered as its gradient (forward and backward paired, as llm.c does).
 *
 * Each op function here runs the fused kernel when `fusedOpsActive()` (the addon's kernels are
 * on, ./tf-backend.ts, and env AGENT_R1_FUSED is not "0"), else its TF.js composition,
 * which is the reference: the model's math without the addon, unchanged. The C
 * kernels follow those compositions operation by operation in float32, so the
 * two agree to rounding (reduction order, and exp within 1 ulp).
 *
 * Measured on the S training step (16 x 256 tokens) these ops and their
 * gradients were about half of the wasm element-wise time: dozens of small
 * kernels (Square, Mean, Cast, Multiply, Sum, SplitV, Concat, Sigmoid, ...),
 * each a full pass over the activations.
 */
import { fusedOpsActive, tf, type KernelFn, type TensorInfo, type WasmBackend } from "./tf-backend.js";
import { loadNative, type NativeAddon } from "../addon.js";

/** Kernel names, prefixed so they never collide with TF.js's own. */
export const FUSED_KERNELS = {
  rmsNorm: "AgentR1RmsNorm",
  rmsNormGrad: "AgentR1RmsNormGrad",
  softmax: "AgentR1ScaledMaskedSoftmax",
  softmaxGrad: "AgentR1ScaledMaskedSoftmaxGrad",
  rope: "AgentR1Rope",
  swiglu: "AgentR1SwiGLU",
  swigluGrad: "AgentR1SwiGLUGrad",
  biasAdd: "AgentR1BiasAdd",
  sumRows: "AgentR1SumRows",
} as const;
const K = FUSED_KERNELS;

// ---------------------------------------------------------------------------
// Ops: fused kernel when active, else the TF.js reference composition.
// ---------------------------------------------------------------------------

/** RMSNorm over the last axis: x (..., H) · rsqrt(mean(x², -1) + eps) · weight (H). */
export function rmsNorm<T extends tf.Tensor>(x: T, weight: tf.Tensor, eps: number): T {
  const H = x.shape[x.rank - 1];
  if (fusedOpsActive() && allFloat32(x, weight) && weight.rank === 1 && weight.shape[0] === H) {
    return run(K.rmsNorm, { x, weight }, { eps }) as T;
  }
  const ms = x.square().mean(-1, true); // (..., 1)
  return x.mul(ms.add(eps).rsqrt()).mul(weight) as T;
}

/**
 * Rotate-half rotary embedding of x (B, T, heads, hd) with cos, sin (R, T, 1, hd/2),
 * R = 1 (every row at the same positions) or B (per-row positions).
 */
export function rope(x: tf.Tensor4D, cos: tf.Tensor, sin: tf.Tensor): tf.Tensor4D {
  if (fusedOpsActive() && allFloat32(x, cos, sin) && ropeTableRows(x.shape, cos.shape, sin.shape) !== undefined) {
    return run(K.rope, { x, cos, sin }, { inverse: false }) as tf.Tensor4D;
  }
  const half = x.shape[3] / 2;
  const [x1, x2] = tf.split(x, [half, half], 3);
  return tf.concat([x1.mul(cos).sub(x2.mul(sin)), x2.mul(cos).add(x1.mul(sin))], 3) as tf.Tensor4D;
}

/**
 * Attention probabilities: softmax over the last axis of scores · scale + mask, where the
 * additive mask broadcasts against scores (..., R, S) and holds no gradient of interest.
 */
export function attentionSoftmax<T extends tf.Tensor>(scores: T, mask: tf.Tensor, scale: number): T {
  const rows = fusedOpsActive() && allFloat32(scores, mask) ? maskRows(scores.shape, mask.shape) : undefined;
  if (rows) return run(K.softmax, { x: scores, mask }, { scale, maskDiv: rows.div, maskMod: rows.mod }) as T;
  return tf.softmax(scores.mul(scale).add(mask), -1) as T;
}

/** SwiGLU: silu(gate) · up = gate · sigmoid(gate) · up, for gate and up of one shape. */
export function swiglu<T extends tf.Tensor>(gate: T, up: T): T {
  if (fusedOpsActive() && allFloat32(gate, up) && sameShape(gate.shape, up.shape))
    return run(K.swiglu, { gate, up }, {}) as T;
  return gate.mul(gate.sigmoid()).mul(up) as T;
}

/** x (..., n) + bias (n); the bias gradient (column sums of dy) is one native pass. */
export function biasAdd<T extends tf.Tensor>(x: T, bias: tf.Tensor): T {
  if (
    fusedOpsActive() &&
    allFloat32(x, bias) &&
    bias.rank === 1 &&
    x.rank >= 1 &&
    x.shape[x.rank - 1] === bias.shape[0]
  ) {
    return run(K.biasAdd, { x, bias }, {}) as T;
  }
  return x.add(bias) as T;
}

// ---------------------------------------------------------------------------
// Shape helpers
// ---------------------------------------------------------------------------

const allFloat32 = (...ts: tf.Tensor[]) => ts.every((t) => t.dtype === "float32");
const sameShape = (a: number[], b: number[]) => a.length === b.length && a.every((d, i) => d === b[i]);
export const sizeOf = (shape: number[]) => shape.reduce((a, b) => a * b, 1);

/** Rows of the rope tables (1 or B) when x (B, T, h, hd) and the tables (R, T, 1, hd/2) fit the kernel; else undefined. */
export function ropeTableRows(x: number[], cos: number[], sin: number[]): number | undefined {
  if (x.length !== 4 || x[3] % 2 !== 0 || !sameShape(cos, sin) || cos.length !== 4) return undefined;
  const [B, T, , hd] = x;
  const [R, Tc, one, half] = cos;
  if (Tc !== T || one !== 1 || half !== hd / 2 || (R !== 1 && R !== B)) return undefined;
  return R;
}

/**
 * For scores (..., S) flattened to rows and a mask broadcasting against them, the mask
 * row of score row r as (r / div) % mod, when the mask's non-broadcast axes form one
 * contiguous block (a causal (R, S) mask, a per-batch (B, 1, 1, S) key mask); else undefined.
 */
export function maskRows(scores: number[], mask: number[]): { div: number; mod: number } | undefined {
  const r = scores.length;
  if (mask.length > r || r < 1) return undefined;
  const m = [...Array<number>(r - mask.length).fill(1), ...mask];
  if (m[r - 1] !== scores[r - 1]) return undefined;
  const kept: number[] = []; // row axes the mask does not broadcast along
  for (let i = 0; i < r - 1; i++) {
    if (m[i] === scores[i] && m[i] !== 1) kept.push(i);
    else if (m[i] !== 1) return undefined; // neither equal nor broadcast
  }
  if (kept.length === 0) return { div: 1, mod: 1 };
  const first = kept[0],
    last = kept[kept.length - 1];
  if (last - first + 1 !== kept.length) {
    // Size-1 axes inside the block are harmless; other gaps are not expressible.
    for (let i = first; i <= last; i++) if (!kept.includes(i) && scores[i] !== 1) return undefined;
  }
  return { div: sizeOf(scores.slice(last + 1, r - 1)), mod: sizeOf(m.slice(first, last + 1)) };
}

/** Sums t over the axes where `shape` (right-aligned) broadcasts, giving a tensor of `shape`. */
function reduceTo(t: tf.Tensor, shape: number[]): tf.Tensor {
  const pad = t.rank - shape.length;
  const axes: number[] = [];
  for (let i = 0; i < t.rank; i++) if (i < pad || (shape[i - pad] === 1 && t.shape[i] !== 1)) axes.push(i);
  return (axes.length ? t.sum(axes, true) : t).reshape(shape);
}

// ---------------------------------------------------------------------------
// Kernels (wasm backend) and gradients
// ---------------------------------------------------------------------------

function run(name: string, inputs: Record<string, tf.Tensor>, attrs: Record<string, unknown>): tf.Tensor | tf.Tensor[] {
  registerFusedKernels();
  return runKernel(name, inputs, attrs);
}

/** Runs a registered kernel by name (the kernel plumbing below is shared with ./train-ops.ts). */
export function runKernel(
  name: string,
  inputs: Record<string, tf.Tensor>,
  attrs: Record<string, unknown>,
): tf.Tensor | tf.Tensor[] {
  return tf.engine().runKernel(name, inputs as unknown as tf.NamedTensorMap, attrs as tf.NamedAttrMap) as
    tf.Tensor | tf.Tensor[];
}

export function addon(): NativeAddon {
  const st = loadNative();
  if (!st.ok) throw new Error(`fused kernels need the native addon: ${st.reason}`);
  return st.addon;
}

export type Args = Parameters<KernelFn>[0];
const f32 = (backend: WasmBackend, t: TensorInfo) => backend.typedArrayFromHeap(t) as Float32Array;
export const lastDim = (t: TensorInfo) => t.shape[t.shape.length - 1] ?? 1;

/**
 * Allocates outputs of the given shapes, then runs `fill` on float32 views of the inputs and
 * outputs (taken after every allocation: growing the heap detaches older views). A throwing
 * fill (a shape check in C) frees the outputs before the error propagates.
 */
export function withOutputs(
  backend: WasmBackend,
  inputs: TensorInfo[],
  shapes: number[][],
  fill: (ins: Float32Array[], outs: Float32Array[]) => void,
): TensorInfo[] {
  const outs = shapes.map((s) => backend.makeOutput(s, "float32"));
  try {
    fill(
      inputs.map((t) => f32(backend, t)),
      outs.map((t) => f32(backend, t)),
    );
  } catch (e) {
    for (const o of outs) backend.disposeData(o.dataId);
    throw e;
  }
  return outs;
}

export function requireFloat32(kernel: string, inputs: Record<string, TensorInfo>): void {
  for (const [name, t] of Object.entries(inputs)) {
    if (t.dtype !== "float32") throw new Error(`${kernel}: ${name} must be float32, got ${t.dtype}`);
  }
}

/** RMSNorm: x (rows, H), weight (H) → y (rows, H). */
function rmsNormKernel({ inputs, backend, attrs }: Args): TensorInfo {
  const { x, weight } = inputs;
  requireFloat32(K.rmsNorm, inputs);
  const cols = lastDim(x),
    rows = cols ? sizeOf(x.shape) / cols : 0;
  return withOutputs(backend, [x, weight], [x.shape], ([xv, wv], [yv]) =>
    addon().rmsNormForward(xv, wv, yv, rows, cols, attrs!.eps as number),
  )[0];
}

/** x (rows, H), weight (H), dy (rows, H) → [dx (rows, H), dweight (H)]. */
function rmsNormGradKernel({ inputs, backend, attrs }: Args): TensorInfo[] {
  const { x, weight, dy } = inputs;
  requireFloat32(K.rmsNormGrad, inputs);
  const cols = lastDim(x),
    rows = cols ? sizeOf(x.shape) / cols : 0;
  return withOutputs(backend, [x, weight, dy], [x.shape, weight.shape], ([xv, wv, dyv], [dxv, dwv]) =>
    addon().rmsNormBackward(xv, wv, dyv, dxv, dwv, rows, cols, attrs!.eps as number),
  );
}

/** Scaled masked softmax: x (rows, S), mask (maskMod, S) → y (rows, S). */
function softmaxKernel({ inputs, backend, attrs }: Args): TensorInfo {
  const { x, mask } = inputs;
  requireFloat32(K.softmax, inputs);
  const cols = lastDim(x),
    rows = cols ? sizeOf(x.shape) / cols : 0;
  const a = attrs as { scale: number; maskDiv: number; maskMod: number };
  return withOutputs(backend, [x, mask], [x.shape], ([xv, mv], [yv]) =>
    addon().softmaxForward(xv, mv, yv, rows, cols, a.scale, a.maskDiv, a.maskMod),
  )[0];
}

/** y (rows, S), dy (rows, S) → dx (rows, S). */
function softmaxGradKernel({ inputs, backend, attrs }: Args): TensorInfo {
  const { y, dy } = inputs;
  requireFloat32(K.softmaxGrad, inputs);
  const cols = lastDim(y),
    rows = cols ? sizeOf(y.shape) / cols : 0;
  return withOutputs(backend, [y, dy], [y.shape], ([yv, dyv], [dxv]) =>
    addon().softmaxBackward(yv, dyv, dxv, rows, cols, attrs!.scale as number),
  )[0];
}

/** RoPE: x (B, T, h, hd), cos / sin (R, T, 1, hd/2) → y (B, T, h, hd); `inverse` for the gradient. */
function ropeKernel({ inputs, backend, attrs }: Args): TensorInfo {
  const { x, cos, sin } = inputs;
  requireFloat32(K.rope, inputs);
  const R = ropeTableRows(x.shape, cos.shape, sin.shape);
  if (R === undefined)
    throw new Error(
      `${K.rope}: x [${x.shape}] and the tables [${cos.shape}], [${sin.shape}] do not fit (B, T, h, hd) and (1 or B, T, 1, hd/2)`,
    );
  const [B, T, h, hd] = x.shape;
  return withOutputs(backend, [x, cos, sin], [x.shape], ([xv, cv, sv], [yv]) =>
    addon().ropeForward(xv, cv, sv, yv, B, T, h, hd, R, Boolean(attrs!.inverse)),
  )[0];
}

/** SwiGLU: gate, up (n) → y (n). */
function swigluKernel({ inputs, backend }: Args): TensorInfo {
  const { gate, up } = inputs;
  requireFloat32(K.swiglu, inputs);
  return withOutputs(backend, [gate, up], [gate.shape], ([gv, uv], [yv]) =>
    addon().swigluForward(gv, uv, yv, sizeOf(gate.shape)),
  )[0];
}

/** gate, up, dy (n) → [dgate (n), dup (n)]. */
function swigluGradKernel({ inputs, backend }: Args): TensorInfo[] {
  const { gate, up, dy } = inputs;
  requireFloat32(K.swigluGrad, inputs);
  return withOutputs(backend, [gate, up, dy], [gate.shape, up.shape], ([gv, uv, dyv], [dgv, duv]) =>
    addon().swigluBackward(gv, uv, dyv, dgv, duv, sizeOf(gate.shape)),
  );
}

/** x (rows, n), bias (n) → y (rows, n). */
function biasAddKernel({ inputs, backend }: Args): TensorInfo {
  const { x, bias } = inputs;
  requireFloat32(K.biasAdd, inputs);
  const cols = lastDim(x),
    rows = cols ? sizeOf(x.shape) / cols : 0;
  return withOutputs(backend, [x, bias], [x.shape], ([xv, bv], [yv]) =>
    addon().biasAddForward(xv, bv, yv, rows, cols),
  )[0];
}

/** x (rows, n) → column sums (n). */
function sumRowsKernel({ inputs, backend }: Args): TensorInfo {
  const { x } = inputs;
  requireFloat32(K.sumRows, inputs);
  const cols = lastDim(x),
    rows = cols ? sizeOf(x.shape) / cols : 0;
  return withOutputs(backend, [x], [[cols]], ([xv], [ov]) => addon().sumRows(xv, ov, rows, cols))[0];
}

/** Registers kernels for the wasm backend under their names (skipping any already registered). */
export function registerWasmKernels(kernels: [string, (a: Args) => TensorInfo | TensorInfo[]][]): void {
  for (const [kernelName, fn] of kernels) {
    if (!tf.getKernel(kernelName, "wasm"))
      tf.registerKernel({ kernelName, backendName: "wasm", kernelFunc: fn as unknown as tf.KernelFunc });
  }
}

let registered = false;

/** Registers the fused kernels for the wasm backend and their gradients (once per thread). */
export function registerFusedKernels(): void {
  if (registered) return;
  registered = true;
  const kernels: [string, (a: Args) => TensorInfo | TensorInfo[]][] = [
    [K.rmsNorm, rmsNormKernel],
    [K.rmsNormGrad, rmsNormGradKernel],
    [K.softmax, softmaxKernel],
    [K.softmaxGrad, softmaxGradKernel],
    [K.rope, ropeKernel],
    [K.swiglu, swigluKernel],
    [K.swigluGrad, swigluGradKernel],
    [K.biasAdd, biasAddKernel],
    [K.sumRows, sumRowsKernel],
  ];
  registerWasmKernels(kernels);

  registerFusedGradients();
}

/**
 * The fused kernels' gradients. Each runs the backward kernel once, eagerly, and hands out its
 * outputs; they live in the backward pass's scope, as TF.js's own intermediate gradients do.
 */
function registerFusedGradients(): void {
  tf.registerGradient({
    kernelName: K.rmsNorm,
    inputsToSave: ["x", "weight"],
    gradFunc: (dy, saved, attrs) => {
      const [x, weight] = saved;
      const [dx, dw] = run(
        K.rmsNormGrad,
        { x, weight, dy: dy as tf.Tensor },
        { eps: (attrs as { eps: number }).eps },
      ) as tf.Tensor[];
      return { x: () => dx, weight: () => dw };
    },
  });
  tf.registerGradient({
    kernelName: K.softmax,
    inputsToSave: ["mask"],
    outputsToSave: [true],
    gradFunc: (dy, saved, attrs) => {
      const [mask, y] = saved;
      const g = dy as tf.Tensor;
      const dx = run(K.softmaxGrad, { y, dy: g }, { scale: (attrs as { scale: number }).scale }) as tf.Tensor;
      // The mask is a constant in the model; its gradient (TF.js's softmax gradient, reduced over broadcast axes) is here for completeness.
      return { x: () => dx, mask: () => reduceTo(g.mul(y).sub(g.mul(y).sum(-1, true).mul(y)), mask.shape) };
    },
  });
  tf.registerGradient({
    kernelName: K.rope,
    inputsToSave: ["x", "cos", "sin"],
    gradFunc: (dy, saved, attrs) => {
      const [x, cos, sin] = saved;
      const g = dy as tf.Tensor4D;
      const inverse = Boolean((attrs as { inverse: boolean }).inverse);
      // The gradient of a rotation is the rotation by the opposite angle.
      const dx = () => run(K.rope, { x: g, cos, sin }, { inverse: !inverse }) as tf.Tensor;
      // cos and sin are constants in the model; their gradients are here for completeness.
      const halves = () => {
        const half = g.shape[3] / 2;
        const [x1, x2] = tf.split(x, [half, half], 3),
          [g1, g2] = tf.split(g, [half, half], 3);
        return { x1, x2, g1, g2 };
      };
      return {
        x: dx,
        cos: () => {
          const { x1, x2, g1, g2 } = halves();
          return reduceTo(g1.mul(x1).add(g2.mul(x2)), cos.shape);
        },
        sin: () => {
          const { x1, x2, g1, g2 } = halves();
          const d = g2.mul(x1).sub(g1.mul(x2));
          return reduceTo(inverse ? d.neg() : d, sin.shape);
        },
      };
    },
  });
  tf.registerGradient({
    kernelName: K.swiglu,
    inputsToSave: ["gate", "up"],
    gradFunc: (dy, saved) => {
      const [gate, up] = saved;
      const [dg, du] = run(K.swigluGrad, { gate, up, dy: dy as tf.Tensor }, {}) as tf.Tensor[];
      return { gate: () => dg, up: () => du };
    },
  });
  tf.registerGradient({
    kernelName: K.biasAdd,
    inputsToSave: ["bias"],
    gradFunc: (dy, saved) => {
      const g = dy as tf.Tensor,
        [bias] = saved;
      return {
        x: () => g.reshape(g.shape),
        bias: () => (run(K.sumRows, { x: g }, {}) as tf.Tensor).reshape(bias.shape),
      };
    },
  });
}
