/**
 * safetensors read/write: u64 LE header length N, N bytes of JSON header, then raw tensor data.
 *
 * Two views of a file. The float32 one (readSafetensorsFile, loadModelWeights) converts F16/BF16
 * to float32 at the file boundary. The raw one (readSafetensorsFileRaw, loadModelWeightsRaw) keeps
 * each tensor in its stored dtype: F32 as a Float32Array, BF16/F16 as their 16-bit patterns in a
 * Uint16Array, so a bf16 model costs 2 bytes a weight in memory. Files are read tensor by tensor
 * straight into each tensor's own typed array (no whole-file buffer), and written the same way.
 * Writers take either kind of tensor (a TensorSet).
 */
import {
  closeSync,
  existsSync,
  fstatSync,
  mkdirSync,
  openSync,
  readSync,
  readdirSync,
  renameSync,
  rmSync,
  writeFileSync,
  writeSync,
} from "node:fs";
import { join } from "node:path";
import { AgentR1Error, ModelFormatError } from "../util/errors.js";
import { fileProblem, fsErrorWords, readTextInput } from "../util/read-file.js";

export type DType = "F32" | "F16" | "BF16";
export interface HostTensor {
  shape: number[];
  data: Float32Array;
}
export type LoadedTensor = HostTensor & { dtype: DType };
/**
 * A tensor in its stored dtype: F32 data is a Float32Array; BF16 and F16 data is a Uint16Array of
 * the 16-bit patterns in host byte order. (A Float32Array always holds values, whatever `dtype`
 * says: a LoadedTensor read from a BF16 file is a RawTensor too, already widened.)
 */
export interface RawTensor {
  dtype: DType;
  shape: number[];
  data: Float32Array | Uint16Array;
}
export interface SafetensorsFile {
  tensors: Map<string, LoadedTensor>;
  metadata: Record<string, string>;
}
export interface RawSafetensorsFile {
  tensors: Map<string, RawTensor>;
  metadata: Record<string, string>;
}
/** Tensors to write: float32 host tensors, raw tensors, or a mix. */
export type TensorSet = Record<string, HostTensor | RawTensor> | Map<string, HostTensor | RawTensor>;

export const SINGLE_FILE = "model.safetensors";
export const INDEX_FILE = "model.safetensors.index.json";
// Keeps each shard well under Node 20's 4 GiB Buffer limit.
const DEFAULT_MAX_SHARD_BYTES = 2 * 1024 ** 3;
const DTYPE_BYTES: Record<DType, number> = { F32: 4, F16: 2, BF16: 2 };
const LE = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;
/** readSync/writeSync move at most 2 GiB - 1 per call. */
const IO_CHUNK = 1 << 30;

/** Typed arrays use host byte order; the file is little-endian. */
function swapIfBE(b: Uint8Array, width: number): void {
  if (LE) return;
  for (let i = 0; i < b.length; i += width) b.subarray(i, i + width).reverse();
}

const isObj = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);
const isCount = (v: unknown): v is number => Number.isSafeInteger(v) && (v as number) >= 0;
const numel = (shape: number[]) => shape.reduce((a, b) => a * b, 1);
const isDType = (v: unknown): v is DType => typeof v === "string" && Object.hasOwn(DTYPE_BYTES, v);
const bytesOf = (a: Float32Array | Uint16Array) => new Uint8Array(a.buffer, a.byteOffset, a.byteLength);

let f16Table: Float32Array | undefined;
function f16ToF32Table(): Float32Array {
  if (f16Table) return f16Table;
  f16Table = new Float32Array(65536);
  for (let h = 0; h < 65536; h++) {
    const sign = h & 0x8000 ? -1 : 1,
      e = (h >> 10) & 0x1f,
      m = h & 0x3ff;
    f16Table[h] =
      e === 0 ? sign * m * 2 ** -24 : e === 31 ? (m ? NaN : sign * Infinity) : sign * (1024 + m) * 2 ** (e - 25);
  }
  return f16Table;
}

/** float32 bits -> float16 bits, round-to-nearest-even, subnormals, inf and NaN. */
export function f32BitsToF16(b: number): number {
  const sign = (b >>> 16) & 0x8000,
    exp = (b >>> 23) & 0xff,
    mant = b & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant ? 0x200 | (mant >>> 13) : 0);
  const e = exp - 112; // rebias 127 -> 15
  if (e >= 31) return sign | 0x7c00;
  if (e <= 0) {
    // subnormal: value = full * 2^(exp-150) = q * 2^-24
    const shift = 14 - e;
    if (shift > 24) return sign;
    const full = mant | 0x800000,
      half = 2 ** (shift - 1);
    let q = Math.floor(full / 2 ** shift);
    const rem = full - q * 2 ** shift;
    if (rem > half || (rem === half && q & 1)) q++;
    return sign | q; // q may carry to 0x400, the smallest normal
  }
  let h = (e << 10) | (mant >>> 13);
  const rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem === 0x1000 && h & 1)) h++; // carry may reach 0x7c00 = inf
  return sign | h;
}

/** float32 bits -> bfloat16 bits, round-to-nearest-even; NaN stays NaN. */
export function f32BitsToBF16(b: number): number {
  if ((b & 0x7fffffff) > 0x7f800000) return (b >>> 16) | 0x40;
  return ((b + 0x7fff + ((b >>> 16) & 1)) >>> 16) & 0xffff;
}

/**
 * A raw tensor's values as float32. F32 data (any Float32Array) is returned as is, not copied;
 * BF16 / F16 bits are widened exactly into a new array.
 */
export function toFloat32(t: RawTensor): Float32Array {
  const { data, dtype } = t;
  if (data instanceof Float32Array) return data;
  const n = data.length,
    out = new Float32Array(n);
  if (dtype === "BF16") {
    const o32 = new Uint32Array(out.buffer);
    for (let i = 0; i < n; i++) o32[i] = data[i] << 16;
  } else if (dtype === "F16") {
    const table = f16ToF32Table();
    for (let i = 0; i < n; i++) out[i] = table[data[i]];
  } else throw new AgentR1Error(`toFloat32: 16-bit data needs dtype BF16 or F16, not ${String(dtype)}`);
  return out;
}

/**
 * float32 values in `dtype`: the same array for F32 (not copied), else a new Uint16Array of
 * BF16 / F16 bits rounded to nearest even.
 */
export function fromFloat32(data: Float32Array, dtype: DType): Float32Array | Uint16Array {
  if (dtype === "F32") return data;
  if (dtype !== "BF16" && dtype !== "F16") throw new AgentR1Error(`fromFloat32: unsupported dtype ${String(dtype)}`);
  const n = data.length,
    bits = new Uint32Array(data.buffer, data.byteOffset, n),
    out = new Uint16Array(n);
  const conv = dtype === "BF16" ? f32BitsToBF16 : f32BitsToF16;
  for (let i = 0; i < n; i++) out[i] = conv(bits[i]);
  return out;
}

/** The file to name for a model directory's weights: model.safetensors, or the index of its shards. */
export const weightsFile = (dir: string): string =>
  existsSync(join(dir, SINGLE_FILE)) || !existsSync(join(dir, INDEX_FILE))
    ? join(dir, SINGLE_FILE)
    : join(dir, INDEX_FILE);

/** 16-bit bits of one dtype as the other's, through the exact float32 value (one rounding). */
function convert16(src: Uint16Array, from: "BF16" | "F16"): Uint16Array {
  const n = src.length,
    out = new Uint16Array(n);
  if (from === "BF16") for (let i = 0; i < n; i++) out[i] = f32BitsToF16(src[i] << 16);
  else {
    const bits = new Uint32Array(f16ToF32Table().buffer);
    for (let i = 0; i < n; i++) out[i] = f32BitsToBF16(bits[src[i]]);
  }
  return out;
}

/** The dtype a tensor is written in when no dtype is asked for: its own for 16-bit data, else F32. */
const nativeDType = (t: HostTensor | RawTensor): DType =>
  t.data instanceof Uint16Array ? (t as RawTensor).dtype : "F32";

/**
 * A tensor's little-endian bytes as `dtype`. On a little-endian host, data already in that dtype
 * is returned as a view (no copy); anything else is converted into a fresh array.
 */
function tensorBytes(t: HostTensor | RawTensor, dtype: DType): Uint8Array {
  let out: Float32Array | Uint16Array;
  const data = t.data;
  if (data instanceof Float32Array) out = fromFloat32(data, dtype);
  else {
    const from = (t as RawTensor).dtype as "BF16" | "F16";
    out = from === dtype ? data : dtype === "F32" ? toFloat32(t as RawTensor) : convert16(data, from);
  }
  if (LE) return bytesOf(out);
  const copy = out === data ? bytesOf(out).slice() : bytesOf(out);
  swapIfBE(copy, DTYPE_BYTES[dtype]);
  return copy;
}

// ---------------------------------------------------------------------------------------------
// Reading

/** One tensor's header entry, validated; offsets are absolute in the file. */
interface Entry {
  name: string;
  dtype: DType;
  shape: number[];
  begin: number;
  end: number;
}
interface Header {
  entries: Entry[];
  metadata: Record<string, string>;
}
/** Bytes of a file or buffer: `size` in all, `read` fills `dst` from byte `pos`. */
interface Source {
  label: string;
  size: number;
  read(dst: Uint8Array, pos: number): void;
}

function parseHeader(src: Source): Header {
  const fileLabel = src.label;
  const fail = (field: string | undefined, msg: string): never => {
    throw new ModelFormatError(fileLabel, field, msg);
  };
  const size = src.size;
  if (size < 8) fail(undefined, `truncated: ${size} bytes, need at least 8 for the header length`);
  const first = new Uint8Array(8);
  src.read(first, 0);
  const n = new DataView(first.buffer).getBigUint64(0, true);
  if (n > BigInt(size - 8)) fail(undefined, `truncated: header length says ${n} bytes but only ${size - 8} follow`);
  const headerLen = Number(n),
    dataStart = 8 + headerLen,
    dataLen = size - dataStart;
  const json = new Uint8Array(headerLen);
  src.read(json, 8);
  let header: unknown;
  try {
    header = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(json));
  } catch (e) {
    fail("header", `not valid UTF-8 JSON: ${(e as Error).message}`);
  }
  if (!isObj(header)) return fail("header", "must be a JSON object");
  const meta = header.__metadata__ ?? {};
  if (!isObj(meta) || !Object.values(meta).every((v) => typeof v === "string")) {
    fail("__metadata__", "must be an object of string values");
  }
  const metadata = Object.fromEntries(Object.entries(meta)) as Record<string, string>; // own keys, even "__proto__"
  const entries: Entry[] = [];
  for (const [name, entry] of Object.entries(header)) {
    if (name === "__metadata__") continue;
    if (!isObj(entry)) return fail(name, "tensor entry must be an object");
    const { dtype, shape, data_offsets: off } = entry;
    if (!isDType(dtype)) return fail(name, `unsupported dtype ${JSON.stringify(dtype)} (supported: F32, F16, BF16)`);
    if (!Array.isArray(shape) || !shape.every(isCount))
      return fail(name, "shape must be an array of non-negative integers");
    if (!Array.isArray(off) || off.length !== 2 || !off.every(isCount))
      return fail(name, "data_offsets must be [begin, end]");
    const [begin, end] = off as [number, number];
    if (begin > end || end > dataLen)
      fail(name, `data_offsets [${begin}, ${end}] lie outside the ${dataLen}-byte data section`);
    const need = numel(shape) * DTYPE_BYTES[dtype];
    if (end - begin !== need)
      fail(name, `data is ${end - begin} bytes but ${dtype} x [${shape.join(", ")}] needs ${need}`);
    entries.push({ name, dtype, shape: [...shape], begin: dataStart + begin, end: dataStart + end });
  }
  return { entries, metadata };
}

/** Copies one tensor's bytes once, into a typed array of its own (offsets need not be aligned). */
function readEntry(src: Source, e: Entry): RawTensor {
  const n = numel(e.shape);
  const data = e.dtype === "F32" ? new Float32Array(n) : new Uint16Array(n);
  const bytes = bytesOf(data);
  src.read(bytes, e.begin);
  swapIfBE(bytes, DTYPE_BYTES[e.dtype]);
  return { dtype: e.dtype, shape: e.shape, data };
}

function readTensors<T>(
  src: Source,
  convert: (t: RawTensor) => T,
  wanted?: Set<string>,
): { tensors: Map<string, T>; metadata: Record<string, string>; names: Set<string> } {
  const { entries, metadata } = parseHeader(src);
  const tensors = new Map<string, T>();
  for (const e of entries) if (!wanted || wanted.has(e.name)) tensors.set(e.name, convert(readEntry(src, e)));
  return { tensors, metadata, names: new Set(entries.map((e) => e.name)) };
}

const memorySource = (bytes: Uint8Array, label: string): Source => ({
  label,
  size: bytes.length,
  read: (dst, pos) => dst.set(bytes.subarray(pos, pos + dst.length)),
});

/** Opens `path` for `fn`, reading with positioned reads; file-system failures become one line naming the path. */
function withFileSource<T>(path: string, fn: (src: Source) => T): T {
  const fsFail = (e: unknown): never => {
    throw new ModelFormatError(path, undefined, fsErrorWords(e));
  };
  const problem = fileProblem(path);
  if (problem) throw new ModelFormatError(path, undefined, problem);
  let fd = -1;
  try {
    fd = openSync(path, "r");
  } catch (e) {
    fsFail(e);
  }
  try {
    let size = 0;
    try {
      size = fstatSync(fd).size;
    } catch (e) {
      fsFail(e);
    }
    return fn({
      label: path,
      size,
      read(dst, pos) {
        let done = 0;
        while (done < dst.length) {
          let got = 0;
          try {
            got = readSync(fd, dst, done, Math.min(dst.length - done, IO_CHUNK), pos + done);
          } catch (e) {
            fsFail(e);
          }
          if (got === 0)
            throw new ModelFormatError(
              path,
              undefined,
              `truncated: the file ended at byte ${pos + done} while reading`,
            );
          done += got;
        }
      },
    });
  } finally {
    closeSync(fd);
  }
}

const toLoaded = (t: RawTensor): LoadedTensor => ({ dtype: t.dtype, shape: t.shape, data: toFloat32(t) });

export function parseSafetensors(bytes: Uint8Array, fileLabel: string): SafetensorsFile {
  const { tensors, metadata } = readTensors(memorySource(bytes, fileLabel), toLoaded);
  return { tensors, metadata };
}

/** Like parseSafetensors, keeping each tensor in its stored dtype. */
export function parseSafetensorsRaw(bytes: Uint8Array, fileLabel: string): RawSafetensorsFile {
  const { tensors, metadata } = readTensors(memorySource(bytes, fileLabel), (t) => t);
  return { tensors, metadata };
}

/** Reads a file, every tensor as float32 (each converted as soon as it is read). */
export function readSafetensorsFile(path: string): SafetensorsFile {
  const { tensors, metadata } = withFileSource(path, (src) => readTensors(src, toLoaded));
  return { tensors, metadata };
}

/** Reads a file keeping every tensor in its stored dtype; no float32 copy of a 16-bit tensor is made. */
export function readSafetensorsFileRaw(path: string): RawSafetensorsFile {
  const { tensors, metadata } = withFileSource(path, (src) => readTensors(src, (t) => t));
  return { tensors, metadata };
}

/** The single-file / sharded-index logic of both loaders; `convert` turns each tensor as it is read. */
function loadWeightsWith<T>(dir: string, convert: (t: RawTensor) => T): Map<string, T> {
  const single = join(dir, SINGLE_FILE),
    indexPath = join(dir, INDEX_FILE);
  if (existsSync(single)) return withFileSource(single, (src) => readTensors(src, convert).tensors);
  if (!existsSync(indexPath)) {
    throw new ModelFormatError(
      dir,
      undefined,
      `no ${SINGLE_FILE} or ${INDEX_FILE} found`,
      "is this a Hugging Face model directory?",
    );
  }
  const text = readTextInput(indexPath, (words) => new ModelFormatError(indexPath, undefined, words));
  let index: unknown;
  try {
    index = JSON.parse(text);
  } catch (e) {
    throw new ModelFormatError(indexPath, undefined, `not valid JSON: ${(e as Error).message}`);
  }
  const map = isObj(index) ? index.weight_map : undefined;
  if (!isObj(map)) throw new ModelFormatError(indexPath, "weight_map", "must be an object {tensor: shard file}");
  const byShard = new Map<string, string[]>();
  for (const [name, shard] of Object.entries(map)) {
    if (typeof shard !== "string" || shard.includes("/") || shard.includes("\\")) {
      throw new ModelFormatError(indexPath, name, "shard must be a file name in the model directory");
    }
    if (!existsSync(join(dir, shard))) throw new ModelFormatError(indexPath, name, `shard ${shard} not found`);
    const names = byShard.get(shard) ?? [];
    if (names.push(name) === 1) byShard.set(shard, names);
  }
  const out = new Map<string, T>();
  for (const [shard, names] of byShard) {
    const path = join(dir, shard);
    // Only the tensors the index assigns to this shard are read.
    const { tensors } = withFileSource(path, (src) => {
      const r = readTensors(src, convert, new Set(names));
      const absent = names.find((n) => !r.names.has(n));
      if (absent !== undefined)
        throw new ModelFormatError(path, absent, `tensor listed in ${INDEX_FILE} is not in this shard`);
      return r;
    });
    for (const name of names) out.set(name, tensors.get(name)!);
  }
  return out;
}

/** Reads model.safetensors, or model.safetensors.index.json + its shards ({"metadata":{...},"weight_map":{name: shardFile}}), as float32. */
export function loadModelWeights(dir: string): Map<string, LoadedTensor> {
  return loadWeightsWith(dir, toLoaded);
}

/**
 * Same files, names, validation and errors as loadModelWeights, but every tensor stays in its
 * stored dtype (F32 → Float32Array, BF16/F16 → Uint16Array of bits). Each tensor's bytes are read
 * once from the file into its own array: peak memory is about the size of the weights.
 */
export function loadModelWeightsRaw(dir: string): Map<string, RawTensor> {
  return loadWeightsWith(dir, (t) => t);
}

// ---------------------------------------------------------------------------------------------
// Writing

const entriesOf = (t: TensorSet): [string, HostTensor | RawTensor][] =>
  t instanceof Map ? [...t.entries()] : Object.entries(t);
const sortedEntries = (t: TensorSet) => entriesOf(t).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));

/** The dtype each tensor is written in: `dtype` when given, else its own (16-bit data) or F32. */
function outputDType(name: string, t: HostTensor | RawTensor, dtype: DType | undefined): DType {
  const data: unknown = t.data;
  if (data instanceof Uint16Array) {
    const own = (t as RawTensor).dtype;
    if (own !== "BF16" && own !== "F16")
      throw new ModelFormatError("safetensors", name, `16-bit data needs dtype BF16 or F16, not ${String(own)}`);
  } else if (!(data instanceof Float32Array)) {
    throw new ModelFormatError("safetensors", name, "data must be a Float32Array or a Uint16Array");
  }
  return dtype ?? nativeDType(t);
}

interface Plan {
  /** The 8-byte length and the space-padded JSON header. */
  head: Uint8Array;
  items: { name: string; t: HostTensor | RawTensor; dtype: DType; bytes: number }[];
  dataBytes: number;
}

function plan(
  list: [string, HostTensor | RawTensor][],
  opts: { dtype?: DType; metadata?: Record<string, string> },
): Plan {
  if (opts.dtype !== undefined && !isDType(opts.dtype))
    throw new ModelFormatError("safetensors", "dtype", `unsupported dtype ${opts.dtype}`);
  const header: [string, unknown][] = [];
  if (opts.metadata && Object.keys(opts.metadata).length > 0) header.push(["__metadata__", opts.metadata]);
  const items: Plan["items"] = [];
  let offset = 0;
  for (const [name, t] of list) {
    if (name === "__metadata__") throw new ModelFormatError("safetensors", name, "reserved name cannot be a tensor");
    const dtype = outputDType(name, t, opts.dtype);
    if (!t.shape.every(isCount) || numel(t.shape) !== t.data.length) {
      throw new ModelFormatError(
        "safetensors",
        name,
        `shape [${t.shape.join(", ")}] does not match ${t.data.length} values`,
      );
    }
    const bytes = t.data.length * DTYPE_BYTES[dtype];
    header.push([name, { dtype, shape: [...t.shape], data_offsets: [offset, offset + bytes] }]);
    items.push({ name, t, dtype, bytes });
    offset += bytes;
  }
  const json = new TextEncoder().encode(JSON.stringify(Object.fromEntries(header)));
  const headerLen = json.length + ((8 - ((8 + json.length) % 8)) % 8);
  const head = new Uint8Array(8 + headerLen);
  new DataView(head.buffer).setBigUint64(0, BigInt(headerLen), true);
  head.set(json, 8);
  head.fill(0x20, 8 + json.length);
  return { head, items, dataBytes: offset };
}

/**
 * The file's bytes. Tensors may be float32 host tensors or raw tensors. With `dtype`, every
 * tensor is written in it (16-bit data of that dtype as is, anything else converted, rounding to
 * nearest even); without, 16-bit data keeps its own dtype and float32 data is written as F32.
 */
export function serializeSafetensors(
  tensors: TensorSet,
  opts: { dtype?: DType; metadata?: Record<string, string> } = {},
): Uint8Array {
  const p = plan(sortedEntries(tensors), opts);
  const out = new Uint8Array(p.head.length + p.dataBytes);
  out.set(p.head);
  let pos = p.head.length;
  for (const it of p.items) {
    out.set(tensorBytes(it.t, it.dtype), pos);
    pos += it.bytes;
  }
  return out;
}

/** Writes through PATH.tmp and a rename; the file is streamed tensor by tensor (no whole-file buffer). */
export function writeSafetensorsFile(
  path: string,
  tensors: TensorSet,
  opts: { dtype?: DType; metadata?: Record<string, string> } = {},
): void {
  const p = plan(sortedEntries(tensors), opts);
  const tmp = path + ".tmp";
  const fd = openSync(tmp, "w");
  try {
    try {
      const put = (b: Uint8Array) => {
        for (let done = 0; done < b.length;) done += writeSync(fd, b, done, Math.min(b.length - done, IO_CHUNK));
      };
      put(p.head);
      for (const it of p.items) put(tensorBytes(it.t, it.dtype));
    } finally {
      closeSync(fd);
    }
    renameSync(tmp, path);
  } catch (e) {
    rmSync(tmp, { force: true });
    throw e;
  }
}

function writeAtomic(path: string, bytes: Uint8Array | string): void {
  writeFileSync(path + ".tmp", bytes);
  renameSync(path + ".tmp", path);
}

const SHARD_RE = /^model-\d{5}-of-\d{5}\.safetensors$/;

/**
 * Writes model.safetensors, or when the total exceeds maxShardBytes, shards named
 * model-00001-of-0000N.safetensors plus model.safetensors.index.json (metadata.total_size = total
 * data bytes). `dtype` as in serializeSafetensors: without it raw 16-bit tensors keep their dtype.
 */
export function saveModelWeights(
  dir: string,
  tensors: TensorSet,
  opts: { dtype?: DType; maxShardBytes?: number; metadata?: Record<string, string> } = {},
): void {
  const dtype = opts.dtype,
    max = opts.maxShardBytes ?? DEFAULT_MAX_SHARD_BYTES;
  const metadata = { format: "pt", ...opts.metadata }; // transformers expects format=pt
  const list = sortedEntries(tensors);
  const sizes = new Map(list.map(([name, t]) => [name, t.data.length * DTYPE_BYTES[outputDType(name, t, dtype)]]));
  const total = list.reduce((s, [name]) => s + sizes.get(name)!, 0);
  mkdirSync(dir, { recursive: true });
  const stale = readdirSync(dir).filter((f) => SHARD_RE.test(f));
  if (total <= max) {
    writeSafetensorsFile(join(dir, SINGLE_FILE), new Map(list), { dtype, metadata });
    for (const f of [INDEX_FILE, ...stale]) rmSync(join(dir, f), { force: true });
    return;
  }
  // Greedy: start a new shard when the next tensor would overflow this one.
  const shards: [string, HostTensor | RawTensor][][] = [];
  let cur: [string, HostTensor | RawTensor][] = [],
    curBytes = 0;
  for (const e of list) {
    const size = sizes.get(e[0])!;
    if (cur.length > 0 && curBytes + size > max) {
      shards.push(cur);
      cur = [];
      curBytes = 0;
    }
    cur.push(e);
    curBytes += size;
  }
  shards.push(cur);
  const pad = (i: number) => String(i).padStart(5, "0");
  const weightMap: [string, string][] = [],
    written = new Set<string>();
  shards.forEach((shard, i) => {
    const file = `model-${pad(i + 1)}-of-${pad(shards.length)}.safetensors`;
    writeSafetensorsFile(join(dir, file), new Map(shard), { dtype, metadata });
    for (const [name] of shard) weightMap.push([name, file]);
    written.add(file);
  });
  const index = { metadata: { total_size: total }, weight_map: Object.fromEntries(weightMap) };
  writeAtomic(join(dir, INDEX_FILE), JSON.stringify(index, null, 2) + "\n");
  for (const f of [SINGLE_FILE, ...stale.filter((s) => !written.has(s))]) rmSync(join(dir, f), { force: true });
}
