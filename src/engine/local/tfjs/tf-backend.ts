/**
 * TensorFlow.js set-up for the TF.js engine: the wasm backend in Node, plus kernel fixes for
 * measured pitfalls of that backend, among them:
 *  - `UnsortedSegmentSum` is missing on wasm, and the gradient of `gather`
 *    (embedding lookup, target-logprob pick) needs it;
 *  - `BatchMatMul` is fast (XNNPACK) only for batch 1 with neither input
 *    transposed, so transposes are done explicitly and batches are looped;
 *  - Identity shares its input's data instead of copying it, and the last two axes transpose in JS.
 * The TF.js engine is the portable one (wasm only) and the reference the C engine is tested against.
 * The umbrella `@tensorflow/tfjs` import registers the gradients.
 */
import * as tf from "@tensorflow/tfjs";
import "@tensorflow/tfjs-backend-wasm";

export type TensorInfo = { dataId: object; shape: number[]; dtype: string };
// The wasm backend's kernel-level API, typed only as far as we use it.
export type WasmBackend = {
  makeOutput(shape: number[], dtype: string): TensorInfo;
  typedArrayFromHeap(t: TensorInfo): Float32Array | Int32Array;
  disposeData(dataId: object): boolean;
};
export type KernelFn = (args: {
  inputs: Record<string, TensorInfo>;
  backend: WasmBackend;
  attrs?: Record<string, unknown>;
}) => TensorInfo | TensorInfo[];

let ready: Promise<void> | undefined;

/** Initializes the wasm backend once per process (or worker). */
export function initBackend(): Promise<void> {
  ready ??= (async () => {
    registerUnsortedSegmentSum();
    wrapBatchMatMul();
    shareIdentity();
    fastMatrixTranspose();
    // The emscripten module installs process-wide handlers that rethrow and print
    // its whole minified source; errors must reach our own handler instead.
    const before = new Set([...process.listeners("uncaughtException"), ...process.listeners("unhandledRejection")]);
    const ok = await tf.setBackend("wasm");
    if (!ok) throw new Error("TensorFlow.js could not start its wasm backend");
    await tf.ready();
    for (const l of process.listeners("uncaughtException"))
      if (!before.has(l)) process.removeListener("uncaughtException", l);
    for (const l of process.listeners("unhandledRejection"))
      if (!before.has(l)) process.removeListener("unhandledRejection", l);
  })();
  return ready;
}

export { tf };

function kernel(name: string): KernelFn {
  const k = tf.getKernel(name, "wasm");
  if (!k) throw new Error(`tfjs wasm kernel ${name} is not registered`);
  return k.kernelFunc as unknown as KernelFn;
}

function registerUnsortedSegmentSum(): void {
  if (tf.getKernel("UnsortedSegmentSum", "wasm")) return;
  tf.registerKernel({
    kernelName: "UnsortedSegmentSum",
    backendName: "wasm",
    kernelFunc: (({ inputs, backend, attrs }: Parameters<KernelFn>[0]) => {
      const { x, segmentIds } = inputs;
      const numSegments = attrs!.numSegments as number;
      const inner = x.shape.slice(1).reduce((a, b) => a * b, 1);
      const out = backend.makeOutput([numSegments, ...x.shape.slice(1)], x.dtype);
      const dst = backend.typedArrayFromHeap(out);
      dst.fill(0);
      const src = backend.typedArrayFromHeap(x);
      const ids = backend.typedArrayFromHeap(segmentIds);
      for (let i = 0; i < ids.length; i++) {
        const seg = ids[i];
        if (seg < 0 || seg >= numSegments) continue;
        const s = i * inner,
          d = seg * inner;
        for (let j = 0; j < inner; j++) dst[d + j] += src[s + j];
      }
      return out;
    }) as unknown as tf.KernelFunc,
  });
}

/**
 * Identity (clone, and many gradient functions) copies its input on wasm; tensors
 * are immutable (Variable.assign swaps the data id), so sharing the data with a
 * reference count, as Reshape does, is safe. Measured: about 8% of a training step.
 */
function shareIdentity(): void {
  const original = tf.getKernel("Identity", "wasm");
  if (!original || (original as { shared?: boolean }).shared) return;
  tf.unregisterKernel("Identity", "wasm");
  tf.registerKernel({
    kernelName: "Identity",
    backendName: "wasm",
    shared: true,
    kernelFunc: (({ inputs, backend }: Parameters<KernelFn>[0]) => {
      const x = inputs.x;
      if (x.dtype === "string") return (original.kernelFunc as unknown as KernelFn)({ inputs, backend });
      (backend as unknown as { incRef(id: object): void }).incRef(x.dataId);
      return { dataId: x.dataId, shape: x.shape.slice(), dtype: x.dtype };
    }) as unknown as tf.KernelFunc,
  } as tf.KernelConfig);
}

/** Transposes of the last two axes (rank 2 or 3) go through the JS blocked transpose; others keep the wasm kernel. */
function fastMatrixTranspose(): void {
  const original = tf.getKernel("Transpose", "wasm");
  if (!original || (original as { fast?: boolean }).fast) return;
  const fallback = original.kernelFunc as unknown as KernelFn;
  tf.unregisterKernel("Transpose", "wasm");
  tf.registerKernel({
    kernelName: "Transpose",
    backendName: "wasm",
    setupFunc: original.setupFunc,
    fast: true,
    kernelFunc: ((args: Parameters<KernelFn>[0]) => {
      const { inputs, backend, attrs } = args;
      const perm = attrs!.perm as number[],
        x = inputs.x;
      const swapLastTwo =
        (perm.length === 2 && perm[0] === 1) || (perm.length === 3 && perm[0] === 0 && perm[1] === 2 && perm[2] === 1);
      if (!swapLastTwo || x.dtype !== "float32") return fallback(args);
      const as3d = { ...x, shape: x.shape.length === 2 ? [1, ...x.shape] : x.shape };
      const out = transposeLastTwo(as3d, backend);
      out.shape = x.shape.length === 2 ? [x.shape[1], x.shape[0]] : out.shape;
      return out;
    }) as unknown as tf.KernelFunc,
  } as tf.KernelConfig);
}

/** A float32 tensor's data as a view of the wasm heap (no copy; valid until the next allocation). */
export function heapView(t: tf.Tensor): Float32Array {
  const backend = tf.backend() as unknown as WasmBackend;
  return backend.typedArrayFromHeap({ dataId: t.dataId, shape: t.shape, dtype: t.dtype }) as Float32Array;
}

/** True while a gradient tape records (inside tf.grads / variableGrads). */
export function recordingGradients(): boolean {
  return (tf.engine() as unknown as { state: { gradientDepth: number } }).state.gradientDepth > 0;
}

function wrapBatchMatMul(): void {
  const original = tf.getKernel("BatchMatMul", "wasm");
  if (!original || (original as { wrapped?: boolean }).wrapped) return;
  const matmul = original.kernelFunc as unknown as KernelFn;
  tf.unregisterKernel("BatchMatMul", "wasm");
  const config = {
    kernelName: "BatchMatMul",
    backendName: "wasm",
    setupFunc: original.setupFunc,
    disposeFunc: original.disposeFunc,
    wrapped: true,
    kernelFunc: ((args: Parameters<KernelFn>[0]) => fastBatchMatMul(args, matmul)) as unknown as tf.KernelFunc,
  };
  tf.registerKernel(config);
}

/**
 * (B, R, C) → (B, C, R) in JS with 16x16 blocks: about 5x faster here than the
 * wasm Transpose kernel, which dominated the cost of transposed products.
 */
function transposeLastTwo(x: TensorInfo, backend: WasmBackend): TensorInfo {
  const [B, R, C] = x.shape;
  const out = backend.makeOutput([B, C, R], "float32");
  // Views after the allocation: growing the heap detaches older views.
  const dst = backend.typedArrayFromHeap(out),
    src = backend.typedArrayFromHeap(x);
  const S = 16;
  for (let b = 0; b < B; b++) {
    const o = b * R * C;
    for (let i0 = 0; i0 < R; i0 += S) {
      const iMax = Math.min(i0 + S, R);
      for (let j0 = 0; j0 < C; j0 += S) {
        const jMax = Math.min(j0 + S, C);
        for (let i = i0; i < iMax; i++) {
          const row = o + i * C;
          for (let j = j0; j < jMax; j++) dst[o + j * R + i] = src[row + j];
        }
      }
    }
  }
  return out;
}

/** Below this many flops per batch item, looping over items is slower than the batched kernel (measured here). */
const LOOP_MIN_FLOPS = 2e6;

function batchOf(t: TensorInfo): number {
  return t.shape.slice(0, -2).reduce((a, b) => a * b, 1);
}

function perItemFlops(a: number[], b: number[], attrs: Record<string, unknown>): number {
  const m = attrs.transposeA ? a[a.length - 1] : a[a.length - 2];
  const k = attrs.transposeA ? a[a.length - 2] : a[a.length - 1];
  const n = attrs.transposeB ? b[b.length - 2] : b[b.length - 1];
  return 2 * m * k * n;
}

/**
 * Moves transposes out of the matmul and loops over the batch so every call
 * hits the fast path (batch 1, no transpose), unless the items are small.
 */
function fastBatchMatMul(args: Parameters<KernelFn>[0], matmul: KernelFn): TensorInfo {
  const { inputs, backend, attrs } = args;
  if (
    perItemFlops(inputs.a.shape, inputs.b.shape, attrs!) < LOOP_MIN_FLOPS &&
    batchOf(inputs.a) * batchOf(inputs.b) > 1
  ) {
    // Many small products (decode-time attention): XNNPACK's per-call set-up (about 0.5 ms,
    // it packs the right operand anew) costs more than the slow batched kernel.
    return matmul(args) as TensorInfo;
  }
  const transposeA = attrs!.transposeA as boolean,
    transposeB = attrs!.transposeB as boolean;
  const temps: TensorInfo[] = [];
  const to3d = (t: TensorInfo, transpose: boolean): TensorInfo => {
    const r = t.shape.length;
    const batch = t.shape.slice(0, -2).reduce((a, b) => a * b, 1);
    let x = kernel("Reshape")({
      inputs: { x: t },
      backend,
      attrs: { shape: [batch, t.shape[r - 2], t.shape[r - 1]] },
    }) as TensorInfo;
    temps.push(x);
    if (transpose) {
      x = transposeLastTwo(x, backend);
      temps.push(x);
    }
    return x;
  };
  const a = to3d(inputs.a, transposeA);
  const b = to3d(inputs.b, transposeB);
  const [ba, m] = a.shape,
    [bb, , n] = b.shape;
  const batch = Math.max(ba, bb);
  const outShape = [
    ...(inputs.a.shape.length >= inputs.b.shape.length ? inputs.a.shape : inputs.b.shape).slice(0, -2),
    m,
    n,
  ];
  let out: TensorInfo;
  if (batch === 1) {
    out = matmul({ inputs: { a, b }, backend, attrs: { transposeA: false, transposeB: false } }) as TensorInfo;
  } else {
    const parts: TensorInfo[] = [];
    const slice = kernel("Slice");
    for (let i = 0; i < batch; i++) {
      const ai =
        ba === 1
          ? a
          : (slice({ inputs: { x: a }, backend, attrs: { begin: [i, 0, 0], size: [1, m, a.shape[2]] } }) as TensorInfo);
      const bi =
        bb === 1
          ? b
          : (slice({ inputs: { x: b }, backend, attrs: { begin: [i, 0, 0], size: [1, b.shape[1], n] } }) as TensorInfo);
      parts.push(
        matmul({ inputs: { a: ai, b: bi }, backend, attrs: { transposeA: false, transposeB: false } }) as TensorInfo,
      );
      if (ai !== a) backend.disposeData(ai.dataId);
      if (bi !== b) backend.disposeData(bi.dataId);
    }
    out = kernel("Concat")({
      inputs: parts as unknown as Record<string, TensorInfo>,
      backend,
      attrs: { axis: 0 },
    }) as TensorInfo;
    for (const p of parts) backend.disposeData(p.dataId);
  }
  for (const t of temps) backend.disposeData(t.dataId);
  out.shape = outShape;
  return out;
}
