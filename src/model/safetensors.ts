/**
 * safetensors read/write: u64 LE header length N, N bytes of JSON header, then raw tensor data.
 * Tensors are always float32 in memory; F16/BF16 are converted at the file boundary.
 */
import { existsSync, mkdirSync, readdirSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ModelFormatError } from "../util/errors.js";
import { readInput, readTextInput } from "../util/read-file.js";

export type DType = "F32" | "F16" | "BF16";
export interface HostTensor {
  shape: number[];
  data: Float32Array;
}
export type LoadedTensor = HostTensor & { dtype: DType };
export interface SafetensorsFile {
  tensors: Map<string, LoadedTensor>;
  metadata: Record<string, string>;
}
export type TensorSet = Record<string, HostTensor> | Map<string, HostTensor>;

export const SINGLE_FILE = "model.safetensors";
export const INDEX_FILE = "model.safetensors.index.json";
// Keeps each shard well under Node 20's 4 GiB Buffer limit.
const DEFAULT_MAX_SHARD_BYTES = 2 * 1024 ** 3;
const DTYPE_BYTES: Record<DType, number> = { F32: 4, F16: 2, BF16: 2 };
const LE = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

/** Typed arrays use host byte order; the file is little-endian. */
function swapIfBE(b: Uint8Array, width: number): void {
  if (LE) return;
  for (let i = 0; i < b.length; i += width) b.subarray(i, i + width).reverse();
}

const isObj = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);
const isCount = (v: unknown): v is number => Number.isSafeInteger(v) && (v as number) >= 0;
const numel = (shape: number[]) => shape.reduce((a, b) => a * b, 1);
const isDType = (v: unknown): v is DType => typeof v === "string" && Object.hasOwn(DTYPE_BYTES, v);

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

function decodeTensor(raw: Uint8Array, dtype: DType, n: number): Float32Array {
  swapIfBE(raw, DTYPE_BYTES[dtype]);
  if (dtype === "F32") return new Float32Array(raw.buffer, 0, n);
  const u16 = new Uint16Array(raw.buffer, 0, n),
    out = new Float32Array(n);
  if (dtype === "BF16") {
    const o32 = new Uint32Array(out.buffer);
    for (let i = 0; i < n; i++) o32[i] = u16[i] << 16;
  } else {
    const t = f16ToF32Table();
    for (let i = 0; i < n; i++) out[i] = t[u16[i]];
  }
  return out;
}

/** Writes `data` as `dtype` into `out` (a fresh buffer, so views are aligned). */
function encodeInto(out: Uint8Array, data: Float32Array, dtype: DType): void {
  const n = data.length;
  if (dtype === "F32") out.set(new Uint8Array(data.buffer, data.byteOffset, n * 4));
  else {
    const bits = new Uint32Array(data.buffer, data.byteOffset, n);
    const u16 = new Uint16Array(out.buffer, out.byteOffset, n);
    const conv = dtype === "BF16" ? f32BitsToBF16 : f32BitsToF16;
    for (let i = 0; i < n; i++) u16[i] = conv(bits[i]);
  }
  swapIfBE(out, DTYPE_BYTES[dtype]);
}

export function parseSafetensors(bytes: Uint8Array, fileLabel: string): SafetensorsFile {
  const fail = (field: string | undefined, msg: string): never => {
    throw new ModelFormatError(fileLabel, field, msg);
  };
  if (bytes.length < 8) fail(undefined, `truncated: ${bytes.length} bytes, need at least 8 for the header length`);
  const n = new DataView(bytes.buffer, bytes.byteOffset, 8).getBigUint64(0, true);
  if (n > BigInt(bytes.length - 8))
    fail(undefined, `truncated: header length says ${n} bytes but only ${bytes.length - 8} follow`);
  const headerLen = Number(n),
    dataStart = 8 + headerLen,
    dataLen = bytes.length - dataStart;
  let header: unknown;
  try {
    header = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes.subarray(8, dataStart)));
  } catch (e) {
    fail("header", `not valid UTF-8 JSON: ${(e as Error).message}`);
  }
  if (!isObj(header)) return fail("header", "must be a JSON object");
  const meta = header.__metadata__ ?? {};
  if (!isObj(meta) || !Object.values(meta).every((v) => typeof v === "string")) {
    fail("__metadata__", "must be an object of string values");
  }
  const metadata = Object.fromEntries(Object.entries(meta)) as Record<string, string>; // own keys, even "__proto__"
  const tensors = new Map<string, LoadedTensor>();
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
    const count = numel(shape),
      need = count * DTYPE_BYTES[dtype];
    if (end - begin !== need)
      fail(name, `data is ${end - begin} bytes but ${dtype} x [${shape.join(", ")}] needs ${need}`);
    // Copy: offsets need not be aligned for a typed-array view.
    const raw = new Uint8Array(end - begin);
    raw.set(bytes.subarray(dataStart + begin, dataStart + end));
    tensors.set(name, { dtype, shape: [...shape], data: decodeTensor(raw, dtype, count) });
  }
  return { tensors, metadata };
}

const entriesOf = (t: TensorSet): [string, HostTensor][] => (t instanceof Map ? [...t.entries()] : Object.entries(t));

export function serializeSafetensors(
  tensors: TensorSet,
  opts: { dtype?: DType; metadata?: Record<string, string> } = {},
): Uint8Array {
  const dtype = opts.dtype ?? "F32";
  if (!isDType(dtype)) throw new ModelFormatError("safetensors", "dtype", `unsupported dtype ${dtype}`);
  const size = DTYPE_BYTES[dtype];
  const list = entriesOf(tensors).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  const header: [string, unknown][] = [];
  if (opts.metadata && Object.keys(opts.metadata).length > 0) header.push(["__metadata__", opts.metadata]);
  let offset = 0;
  for (const [name, t] of list) {
    if (name === "__metadata__") throw new ModelFormatError("safetensors", name, "reserved name cannot be a tensor");
    if (!t.shape.every(isCount) || numel(t.shape) !== t.data.length) {
      throw new ModelFormatError(
        "safetensors",
        name,
        `shape [${t.shape.join(", ")}] does not match ${t.data.length} values`,
      );
    }
    header.push([name, { dtype, shape: [...t.shape], data_offsets: [offset, offset + t.data.length * size] }]);
    offset += t.data.length * size;
  }
  const json = new TextEncoder().encode(JSON.stringify(Object.fromEntries(header)));
  const headerLen = json.length + ((8 - ((8 + json.length) % 8)) % 8);
  const out = new Uint8Array(8 + headerLen + offset);
  new DataView(out.buffer).setBigUint64(0, BigInt(headerLen), true);
  out.set(json, 8);
  out.fill(0x20, 8 + json.length, 8 + headerLen);
  let pos = 8 + headerLen;
  for (const [, t] of list) {
    encodeInto(out.subarray(pos, pos + t.data.length * size), t.data, dtype);
    pos += t.data.length * size;
  }
  return out;
}

export function readSafetensorsFile(path: string): SafetensorsFile {
  return parseSafetensors(
    readInput(path, (words) => new ModelFormatError(path, undefined, words)),
    path,
  );
}

function writeAtomic(path: string, bytes: Uint8Array | string): void {
  writeFileSync(path + ".tmp", bytes);
  renameSync(path + ".tmp", path);
}

export function writeSafetensorsFile(
  path: string,
  tensors: TensorSet,
  opts?: { dtype?: DType; metadata?: Record<string, string> },
): void {
  writeAtomic(path, serializeSafetensors(tensors, opts));
}

/** Reads model.safetensors, or model.safetensors.index.json + its shards ({"metadata":{...},"weight_map":{name: shardFile}}). */
export function loadModelWeights(dir: string): Map<string, LoadedTensor> {
  const single = join(dir, SINGLE_FILE),
    indexPath = join(dir, INDEX_FILE);
  if (existsSync(single)) return readSafetensorsFile(single).tensors;
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
  const out = new Map<string, LoadedTensor>();
  for (const [shard, names] of byShard) {
    const path = join(dir, shard),
      { tensors } = readSafetensorsFile(path);
    for (const name of names) {
      const t = tensors.get(name);
      if (!t) throw new ModelFormatError(path, name, `tensor listed in ${INDEX_FILE} is not in this shard`);
      out.set(name, t);
    }
  }
  return out;
}

const SHARD_RE = /^model-\d{5}-of-\d{5}\.safetensors$/;

/** Writes model.safetensors, or when the total exceeds maxShardBytes, shards named model-00001-of-0000N.safetensors plus model.safetensors.index.json (metadata.total_size = total data bytes). */
export function saveModelWeights(
  dir: string,
  tensors: TensorSet,
  opts: { dtype?: DType; maxShardBytes?: number; metadata?: Record<string, string> } = {},
): void {
  const dtype = opts.dtype ?? "F32",
    max = opts.maxShardBytes ?? DEFAULT_MAX_SHARD_BYTES;
  const metadata = { format: "pt", ...opts.metadata }; // transformers expects format=pt
  const list = entriesOf(tensors).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  const bytesOf = (t: HostTensor) => t.data.length * DTYPE_BYTES[dtype];
  const total = list.reduce((s, [, t]) => s + bytesOf(t), 0);
  mkdirSync(dir, { recursive: true });
  const stale = readdirSync(dir).filter((f) => SHARD_RE.test(f));
  if (total <= max) {
    writeSafetensorsFile(join(dir, SINGLE_FILE), new Map(list), { dtype, metadata });
    for (const f of [INDEX_FILE, ...stale]) rmSync(join(dir, f), { force: true });
    return;
  }
  // Greedy: start a new shard when the next tensor would overflow this one.
  const shards: [string, HostTensor][][] = [];
  let cur: [string, HostTensor][] = [],
    curBytes = 0;
  for (const e of list) {
    if (cur.length > 0 && curBytes + bytesOf(e[1]) > max) {
      shards.push(cur);
      cur = [];
      curBytes = 0;
    }
    cur.push(e);
    curBytes += bytesOf(e[1]);
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
