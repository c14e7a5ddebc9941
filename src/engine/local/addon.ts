/**
 * The addon (native/agent_r1_native.c, built by node-gyp at install into
 * build/Release/agent_r1_native.node): its loader, its typed interface, and the choice of backend:
 *  - "native": the C engine (./native/), which runs the whole decoder in the addon;
 *  - "tfjs": the TF.js engine (./tfjs/), on TensorFlow.js's wasm backend alone;
 *  - "auto": native when the addon loads, else tfjs.
 * The choice is the engine option `backend`, else env AGENT_R1_BACKEND, else auto.
 * AGENT_R1_NATIVE_DISABLE=1 makes the loader act as if the addon failed to load.
 *
 * The addon's matrix products run on the project's own kernels (native/gemm.c, always
 * built) or on the system BLAS the build found (OpenBLAS, Accelerate): the engine option
 * `blas` (own, system or auto), else env AGENT_R1_BLAS, else auto; see resolveBlas.
 */
import { existsSync } from "node:fs";
import { availableParallelism } from "node:os";
import { createRequire } from "node:module";
import { join } from "node:path";
import { InputError } from "../../util/errors.js";
import { packageRoot } from "../../util/package-root.js";
import { nativeDisabledSetting, settings } from "../../util/settings.js";

/** The own kernels' micro-kernels, best first. */
export const GEMM_KERNELS = ["amx", "avx512bf16", "avx512", "avx2", "portable"] as const;
export type GemmKernel = (typeof GEMM_KERNELS)[number];

export const BACKEND_CHOICES = ["auto", "native", "tfjs"] as const;
export type BackendChoice = (typeof BACKEND_CHOICES)[number];
/** A backend the engine actually runs on. */
export type BackendName = Exclude<BackendChoice, "auto">;

export interface Addon {
  /**
   * For i < batch: c[i] (m, n) = op(a[aIndex[i] ?? i]) @ op(b[bIndex[i] ?? i]), where a's items
   * are (m, k) — (k, m) when transA — and b's are (k, n) — (n, k) when transB. Throws on a bad shape.
   */
  gemm(
    a: Float32Array,
    b: Float32Array,
    c: Float32Array,
    batch: number,
    m: number,
    n: number,
    k: number,
    transA: boolean,
    transB: boolean,
    aIndex?: Int32Array | null,
    bIndex?: Int32Array | null,
  ): void;
  /**
   * One product as the native engine computes it (native/blas.h's blas_gemm): c (m, n) = op(a) @ op(b),
   * or c += op(a) @ op(b) when accumulate (default false). a holds (m, k) — (k, m) when transA —,
   * b (k, n) — (n, k) when transB — in bDtype: a Float32Array for "f32", a Uint16Array of bfloat16 /
   * float16 bit patterns for "bf16" / "f16", widened to float32 as it is read (the own kernels run
   * half-precision B whatever setBlas chose). Arrays may be longer than their matrices. Throws a
   * TypeError / RangeError naming a bad argument or a too-short array.
   */
  gemmEx(
    a: Float32Array,
    b: Float32Array | Uint16Array,
    c: Float32Array,
    m: number,
    n: number,
    k: number,
    transA: boolean,
    transB: boolean,
    bDtype: "f32" | "bf16" | "f16",
    accumulate?: boolean,
  ): void;
  /** Which matrix products gemm runs (process-wide); "system" throws a RangeError when the build has none. */
  setBlas(name: BlasName): void;
  /**
   * Forces the own kernels' micro-kernel ("auto" = the best the CPU runs); false, and no change, when the CPU lacks it.
   * "amx" is "avx512" plus AMX tiles for a bfloat16 B (A rounded to bfloat16); "avx512bf16" is "avx512" plus
   * AVX512_BF16's dot products (VDPBF16PS) for a bfloat16 B, A rounded the same way.
   */
  setGemmKernel(name: GemmKernel | "auto"): boolean;
  /** Matrix-product threads per call (process-wide, both implementations). */
  setThreads(n: number): void;
  getThreads(): number;
  /** Threads per fused kernel (1..16, default 1; process-wide). */
  setFusedThreads(n: number): void;
  getFusedThreads(): number;
  info(): NativeInfo;

  // Kernels the C engine calls (native/kernel_bindings.c, native/kernels/); every length is checked (a wrong one throws a
  // RangeError naming the argument).
  /** AdamW on n floats: writes wOut, mOut, vOut (see train-ops.ts adamwUpdate for the formula). */
  adamwStep(
    w: Float32Array,
    g: Float32Array,
    m: Float32Array,
    v: Float32Array,
    wOut: Float32Array,
    mOut: Float32Array,
    vOut: Float32Array,
    n: number,
    lr: number,
    beta1: number,
    beta2: number,
    eps: number,
    weightDecay: number,
    bc1: number,
    bc2: number,
    gradScale: number,
  ): void;
  /** Σ x², accumulated in double. */
  sumSquares(x: Float32Array): number;
  /**
   * One token per row from softmax(logits[i] / temperatures[i]) by the inverse CDF at uniforms[i]
   * (native/kernels/draw_rows.c): tokens[i] and its logprob. Every logits[i] has the same length.
   */
  drawTokens(
    logits: Float32Array[],
    temperatures: Float64Array,
    uniforms: Float64Array,
    tokens: Int32Array,
    logprobs: Float64Array,
  ): void;
}

/** What the addon runs on. */
export interface NativeInfo {
  /** The matrix products in use. */
  blas: BlasName;
  /** The system BLAS built in (its name and configuration), or null when the build found none. */
  system: string | null;
  /** The own kernels' micro-kernel: "amx", "avx512bf16", "avx512", "avx2" or "portable". */
  kernel: string;
  threads: number;
  fusedThreads: number;
}

export const BLAS_CHOICES = ["auto", "own", "system"] as const;
export type BlasChoice = (typeof BLAS_CHOICES)[number];
/** The matrix products the addon actually runs. */
export type BlasName = Exclude<BlasChoice, "auto">;

export type AddonStatus = { ok: true; addon: Addon; path: string } | { ok: false; reason: string };

export const ADDON_FILE = join("build", "Release", "agent_r1_native.node");

let loaded: AddonStatus | undefined;

/** The package root (util/package-root.ts), or undefined where it cannot be found: the loader never throws. */
function rootOrNone(): string | undefined {
  try {
    return packageRoot();
  } catch {
    return undefined;
  }
}

/** The addon, where the native engine already runs (so its absence is a bug, not an input error). */
export function requireAddon(): Addon {
  const st = loadAddon();
  if (!st.ok) throw new Error(`internal: the native addon is unavailable: ${st.reason}`);
  return st.addon;
}

/** Loads the addon once per thread; never throws. */
export function loadAddon(): AddonStatus {
  if (nativeDisabledSetting()) {
    return { ok: false, reason: "disabled by AGENT_R1_NATIVE_DISABLE" };
  }
  if (loaded) return loaded;
  const root = rootOrNone();
  const path = root ? join(root, ADDON_FILE) : undefined;
  if (!path || !existsSync(path)) {
    loaded = {
      ok: false,
      reason: `the addon is not built: ${path ?? ADDON_FILE} is missing; build it with 'npm run build:native', which needs a C compiler, make and python3`,
    };
    return loaded;
  }
  try {
    const addon = createRequire(import.meta.url)(path) as Addon;
    if (typeof addon.gemm !== "function") throw new Error("it exports no gemm function");
    if (typeof addon.drawTokens !== "function" || typeof addon.setBlas !== "function")
      throw new Error("it is an old build without the current kernels: rebuild it with 'npm run build:native'");
    loaded = { ok: true, addon, path };
  } catch (e) {
    loaded = { ok: false, reason: `${path} failed to load: ${(e as Error).message.split("\n")[0]}` };
  }
  return loaded;
}

/** Checks a backend name from a flag, config or env; the error names where it came from. */
export function parseBackend(value: string, where: string): BackendChoice {
  if ((BACKEND_CHOICES as readonly string[]).includes(value)) return value as BackendChoice;
  throw new InputError(`${where}: unknown backend '${value}'; choose one of: ${BACKEND_CHOICES.join(", ")}`);
}

/** The requested choice: the option, else env AGENT_R1_BACKEND, else auto. */
export function requestedBackend(choice?: BackendChoice): BackendChoice {
  if (choice !== undefined) return parseBackend(choice, "engine.backend");
  const env = settings().backend;
  return env ? parseBackend(env, "AGENT_R1_BACKEND") : "auto";
}

/**
 * The engine `auto` picks when the addon loads: the native engine, faster than the TF.js engine
 * on every workload of `npm run bench:engine` (docs/benchmarks.md) and not bound by a wasm heap.
 */
export const AUTO_ENGINE: BackendName = "native";

export interface ResolvedBackend {
  backend: BackendName;
  /** Why auto fell back to tfjs (unset when it did not). */
  fallback?: string;
}

/** Resolves a choice to the backend to run; `native` that cannot load is an InputError naming the reason. */
export function resolveBackend(choice?: BackendChoice): ResolvedBackend {
  const want = requestedBackend(choice);
  if (want === "tfjs") return { backend: "tfjs" };
  const st = loadAddon();
  if (st.ok) return { backend: want === "native" ? "native" : AUTO_ENGINE };
  if (want === "native") {
    throw new InputError(
      `the native backend is unavailable: ${st.reason}`,
      "use --backend tfjs (or engine.backend=tfjs), or build the addon",
    );
  }
  return { backend: "tfjs", fallback: st.reason };
}

/**
 * The backend in a few words: "native backend, own avx512 kernels", "native backend, OpenBLAS",
 * "tfjs backend". The addon's BLAS choice is process-wide, so any thread can read it.
 */
export function backendLabel(backend: BackendName): string {
  const st = loadAddon();
  if (backend === "tfjs" || !st.ok) return "tfjs backend";
  const info = st.addon.info();
  return info.blas === "own"
    ? `native backend, own ${info.kernel} kernels`
    : `native backend, ${(info.system ?? "system BLAS").split(" ")[0]}`;
}

/** The one line a command prints when auto falls back. */
export function fallbackLine(reason: string): string {
  return `agent-r1: native backend unavailable (${reason}); using tfjs`;
}

/** Checks a BLAS name from a flag, config or env; the error names where it came from. */
/** How products with a bfloat16 weight run: in bfloat16 (A rounded to bfloat16), exact float32, or auto. */
export const BF16_PRODUCT_CHOICES = ["auto", "tiles", "exact"] as const;
export type Bf16Products = (typeof BF16_PRODUCT_CHOICES)[number];

/** The kernels that multiply by a bfloat16 weight in bfloat16 (AMX tiles, AVX512_BF16 dot products), best first. */
const BF16_KERNELS: readonly string[] = ["amx", "avx512bf16"] satisfies GemmKernel[];

/**
 * Sets how the own kernels multiply by a bfloat16 weight (process-wide, like setBlas):
 * "tiles" on the CPU's bfloat16 units — AMX tiles, else AVX512_BF16's dot products — the other
 * operand rounded to bfloat16 and the sums in float32 (as PyTorch and vLLM compute in bfloat16);
 * "exact" widens the weight to float32 and keeps the other operand as it is; "auto" (default) is
 * tiles where the CPU (and, for AMX, the OS) has them. Returns the one in effect.
 */
export function applyBf16Products(addon: Addon, choice: Bf16Products = "auto"): "tiles" | "exact" {
  const inBf16 = () => BF16_KERNELS.includes(addon.info().kernel);
  if (choice === "exact") {
    if (inBf16()) addon.setGemmKernel("avx512");
    return "exact";
  }
  if (choice === "tiles" && !BF16_KERNELS.some((k) => addon.setGemmKernel(k as GemmKernel)))
    throw new InputError(
      "engine.bf16Products is tiles, but this CPU or OS has no bfloat16 units (AMX-BF16 with Linux 5.16 or later, or AVX512_BF16)",
      "use engine.bf16Products=auto or exact",
    );
  if (choice === "auto") addon.setGemmKernel("auto");
  return inBf16() ? "tiles" : "exact";
}

export function parseBlas(value: string, where: string): BlasChoice {
  if ((BLAS_CHOICES as readonly string[]).includes(value)) return value as BlasChoice;
  throw new InputError(`${where}: unknown BLAS '${value}'; choose one of: ${BLAS_CHOICES.join(", ")}`);
}

/**
 * The matrix products for a choice (the option, else env AGENT_R1_BLAS, else auto):
 * `own` always exists; `system` needs a build that found one (else an InputError saying
 * so); `auto` is the own kernels, which `npm run bench:gemm` and `bench:engine -- --blas`
 * measured at or above OpenBLAS on the engine's figures (docs/benchmarks.md).
 */
export function resolveBlas(addon: Addon, choice?: BlasChoice): BlasName {
  const env = settings().blas;
  const want = choice ?? (env ? parseBlas(env, "AGENT_R1_BLAS") : "auto");
  if (want === "system" && addon.info().system === null) {
    throw new InputError(
      "engine.blas is system, but the native addon was built without a system BLAS (none was found at install)",
      "install libopenblas-dev and run 'npm run build:native', or use engine.blas=own",
    );
  }
  return want === "system" ? "system" : "own";
}

/**
 * BLAS threads per matrix product for an engine of `replicas` replicas: env
 * AGENT_R1_BLAS_THREADS, else the cores left to each replica (1 with one replica
 * per core, as the engine runs by default; all cores for a single replica).
 */
export function defaultBlasThreads(replicas: number): number {
  return settings().blasThreads ?? Math.max(1, Math.floor(availableParallelism() / Math.max(1, replicas)));
}
