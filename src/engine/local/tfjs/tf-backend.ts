/**
 * TensorFlow.js set-up for the TF.js engine: the wasm backend in Node, plus kernel fixes for
 * measured pitfalls of that backend, among them:
 *  - `UnsortedSegmentSum` is missing on wasm, and the gradient of `gather`
 *    (embedding lookup, target-logprob pick) needs it;
 *  - `BatchMatMul` is fast (XNNPACK) only for batch 1 with neither input
 *    transposed, so transposes are done explicitly and batches are looped.
 * On the addon's kernels (option tfjsKernels, ../addon.ts; matmulBackend() "native"), `BatchMatMul`
 * instead calls the addon's gemm (its own kernels or the system BLAS) on views of the wasm heap
 * (no copies; transposes are flags), and the model's fused element-wise ops (./fused-ops.ts) and
 * row gathers (`GatherV2` along axis 0: embedding lookups, KV-cache rows) run as C kernels unless
 * env AGENT_R1_FUSED=0 (read when the kernels are chosen) or setFusedOps(false);
 * env AGENT_R1_FUSED_THREADS sets their threads per kernel (default 1).
 * The umbrella `@tensorflow/tfjs` import registers the gradients.
 */
import * as tf from "@tensorflow/tfjs";
import "@tensorflow/tfjs-backend-wasm";
import { loadNative, resolveBlas, type BackendName, type BlasChoice, type NativeAddon } from "../addon.js";
import { InputError } from "../../../util/errors.js";
import { settings } from "../../../util/settings.js";

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
    wrapGather();
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

/** This thread's sgemm when its matrix products run natively. */
let native: NativeAddon | undefined;
/** Whether the model uses the addon's fused kernels while the native backend is on. */
let fusedOn = true;
const claims: Record<BackendName, number> = { native: 0, tfjs: 0 };

/** The backend this thread's matrix products run on. */
export function matmulBackend(): BackendName {
  return native ? "native" : "tfjs";
}

/** True when the model should route RMSNorm, RoPE, the attention softmax and SwiGLU through the addon's fused kernels. */
export function fusedOpsActive(): boolean {
  return native !== undefined && fusedOn;
}

/**
 * Turns the fused kernels on or off in this thread (A/B timing, tests); the
 * TF.js compositions they replace run when off. Each switch to the native
 * backend resets it from env AGENT_R1_FUSED ("0" = off; default on).
 */
export function setFusedOps(on: boolean): void {
  fusedOn = on;
}

/**
 * Switches this thread's matrix products (tests; engines use claimBackend).
 * "native" throws an InputError naming the reason when the addon cannot load;
 * `threads` sets threads per product and `blas` the matrix products (both
 * process-wide; default 1 thread, env AGENT_R1_BLAS else auto; see resolveBlas).
 */
export function setMatmulBackend(backend: BackendName, threads = 1, blas?: BlasChoice): void {
  if (backend === "tfjs") {
    native = undefined;
    return;
  }
  const st = loadNative();
  if (!st.ok)
    throw new InputError(`the native backend is unavailable: ${st.reason}`, "use the tfjs backend, or build the addon");
  st.addon.setBlas(resolveBlas(st.addon, blas));
  st.addon.setThreads(threads);
  native = st.addon;
  const s = settings();
  fusedOn = s.fused;
  if (s.fusedThreads !== undefined) st.addon.setFusedThreads(s.fusedThreads);
}

/**
 * An engine replica runs its matrix products on `backend` until it calls the
 * returned release. The kernel is per thread (per TF.js instance), so replicas
 * on different backends cannot share a thread: that is an error, not a silent switch.
 */
export function claimBackend(backend: BackendName, threads = 1, blas?: BlasChoice): () => void {
  const other: BackendName = backend === "native" ? "tfjs" : "native";
  if (claims[other] > 0) {
    throw new InputError(
      `an engine on the ${other} backend is already loaded in this thread; one thread runs one backend`,
      "dispose it first, or load the engines with workers >= 1 (each replica then has its own thread)",
    );
  }
  setMatmulBackend(backend, threads, blas);
  claims[backend]++;
  let released = false;
  return () => {
    if (released) return;
    released = true;
    claims[backend]--;
  };
}

/**
 * BatchMatMul on BLAS: out (...outer, m, n) = op(a) @ op(b), where the outer
 * (batch) dimensions broadcast as in NumPy. Reads a and b and writes the output
 * in place on the wasm heap.
 */
function nativeBatchMatMul(args: Parameters<KernelFn>[0], addon: NativeAddon): TensorInfo {
  const { inputs, backend, attrs } = args;
  const a = inputs.a,
    b = inputs.b;
  const ta = Boolean(attrs!.transposeA),
    tb = Boolean(attrs!.transposeB);
  if (a.dtype !== "float32" || b.dtype !== "float32")
    throw new Error(`BatchMatMul: float32 inputs only, got ${a.dtype} and ${b.dtype}`);
  const ra = a.shape.length,
    rb = b.shape.length;
  if (ra < 2 || rb < 2)
    throw new Error(`BatchMatMul: inputs must have rank >= 2, got shapes [${a.shape}] and [${b.shape}]`);
  const m = ta ? a.shape[ra - 1] : a.shape[ra - 2];
  const k = ta ? a.shape[ra - 2] : a.shape[ra - 1];
  const kb = tb ? b.shape[rb - 1] : b.shape[rb - 2];
  const n = tb ? b.shape[rb - 2] : b.shape[rb - 1];
  if (k !== kb) {
    throw new Error(
      `BatchMatMul: inner dimensions differ (${k} vs ${kb}) for shapes [${a.shape}] and [${b.shape}], transposeA=${ta}, transposeB=${tb}`,
    );
  }
  const { outer, aIndex, bIndex } = broadcastBatch(a.shape.slice(0, -2), b.shape.slice(0, -2));
  const batch = outer.reduce((x, y) => x * y, 1);
  const out = backend.makeOutput([...outer, m, n], "float32");
  // Views after the allocation: growing the heap detaches older views.
  const av = backend.typedArrayFromHeap(a) as Float32Array,
    bv = backend.typedArrayFromHeap(b) as Float32Array;
  const cv = backend.typedArrayFromHeap(out) as Float32Array;
  addon.gemm(av, bv, cv, batch, m, n, k, ta, tb, aIndex, bIndex);
  return out;
}

/**
 * The broadcast batch shape of two outer shapes and, for each output item, the
 * item of a and of b it reads (null where that is the item itself).
 */
export function broadcastBatch(
  oa: number[],
  ob: number[],
): { outer: number[]; aIndex: Int32Array | null; bIndex: Int32Array | null } {
  const r = Math.max(oa.length, ob.length);
  const pa = [...Array<number>(r - oa.length).fill(1), ...oa],
    pb = [...Array<number>(r - ob.length).fill(1), ...ob];
  const outer = pa.map((d, i) => {
    if (d !== pb[i] && d !== 1 && pb[i] !== 1)
      throw new Error(`BatchMatMul: batch shapes [${oa}] and [${ob}] do not broadcast`);
    return Math.max(d, pb[i]);
  });
  const batch = outer.reduce((x, y) => x * y, 1);
  const index = (p: number[]): Int32Array | null => {
    if (p.every((d, i) => d === outer[i])) return null;
    // Row-major strides of the input's own items, 0 along broadcast axes.
    const strides = new Array<number>(r);
    for (let i = r - 1, s = 1; i >= 0; i--) {
      strides[i] = p[i] === 1 ? 0 : s;
      s *= p[i];
    }
    const idx = new Int32Array(batch);
    for (let j = 0; j < batch; j++) {
      let rest = j,
        at = 0;
      for (let i = r - 1; i >= 0; i--) {
        at += (rest % outer[i]) * strides[i];
        rest = Math.floor(rest / outer[i]);
      }
      idx[j] = at;
    }
    return idx;
  };
  return { outer, aIndex: index(pa), bIndex: index(pb) };
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
    kernelFunc: ((args: Parameters<KernelFn>[0]) =>
      native ? nativeBatchMatMul(args, native) : fastBatchMatMul(args, matmul)) as unknown as tf.KernelFunc,
  };
  tf.registerKernel(config);
}

/**
 * GatherV2 along axis 0 (embedding lookup, cache rows, the picked log-probs) as a
 * native row copy while the fused kernels are on: the wasm kernel took about 11 ms
 * for the 2048 embedding rows of an S micro-batch. Other gathers keep the wasm kernel.
 */
function wrapGather(): void {
  const original = tf.getKernel("GatherV2", "wasm");
  if (!original || (original as { wrapped?: boolean }).wrapped) return;
  const gather = original.kernelFunc as unknown as KernelFn;
  tf.unregisterKernel("GatherV2", "wasm");
  tf.registerKernel({
    kernelName: "GatherV2",
    backendName: "wasm",
    setupFunc: original.setupFunc,
    disposeFunc: original.disposeFunc,
    wrapped: true,
    kernelFunc: ((args: Parameters<KernelFn>[0]) => {
      const { x, indices } = args.inputs;
      const axis = args.attrs!.axis as number,
        batchDims = (args.attrs!.batchDims as number | undefined) ?? 0;
      const onAxis0 = axis === 0 || axis === -x.shape.length;
      if (
        !native ||
        !fusedOn ||
        !onAxis0 ||
        batchDims !== 0 ||
        x.dtype !== "float32" ||
        indices.dtype !== "int32" ||
        x.shape.length < 1
      )
        return gather(args);
      return nativeGatherRows(args.backend, x, indices, native);
    }) as unknown as tf.KernelFunc,
  } as tf.KernelConfig);
}

/** out (...indices.shape, ...x.shape[1:]) = x (rows, ...)[indices]. */
function nativeGatherRows(backend: WasmBackend, x: TensorInfo, indices: TensorInfo, addon: NativeAddon): TensorInfo {
  const rows = x.shape[0],
    cols = x.shape.slice(1).reduce((a, b) => a * b, 1);
  const out = backend.makeOutput([...indices.shape, ...x.shape.slice(1)], "float32");
  try {
    // Views after the allocation: growing the heap detaches older views.
    addon.gatherRows(
      backend.typedArrayFromHeap(x) as Float32Array,
      backend.typedArrayFromHeap(indices) as Int32Array,
      backend.typedArrayFromHeap(out) as Float32Array,
      rows,
      cols,
    );
  } catch (e) {
    backend.disposeData(out.dataId);
    throw e;
  }
  return out;
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
