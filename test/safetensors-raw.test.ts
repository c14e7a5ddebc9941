import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import {
  type DType,
  type HostTensor,
  type RawTensor,
  f32BitsToBF16,
  f32BitsToF16,
  fromFloat32,
  loadModelWeights,
  loadModelWeightsRaw,
  parseSafetensorsRaw,
  readSafetensorsFile,
  readSafetensorsFileRaw,
  saveModelWeights,
  serializeSafetensors,
  toFloat32,
  writeSafetensorsFile,
} from "../src/model/safetensors.js";
import { AgentR1Error, ModelFormatError } from "../src/util/errors.js";

const tmp = () => fs.mkdtempSync(path.join(os.tmpdir(), "agent-r1-straw-"));
const bitsOf = (a: Float32Array) => [...new Uint32Array(a.buffer, a.byteOffset, a.length)];
const f32Bits = (v: number) => new Uint32Array(Float32Array.of(v).buffer)[0];
/** Every 16-bit pattern, NaNs with payloads included. */
const allPatterns = () => Uint16Array.from({ length: 65536 }, (_, i) => i);
const isBF16NaN = (h: number) => (h & 0x7f80) === 0x7f80 && (h & 0x7f) !== 0;
const isF16NaN = (h: number) => (h & 0x7c00) === 0x7c00 && (h & 0x3ff) !== 0;

/** The header JSON of a file's bytes. */
function headerOf(bytes: Uint8Array): Record<string, any> {
  const len = Number(new DataView(bytes.buffer, bytes.byteOffset).getBigUint64(0, true));
  return JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + len)));
}

function sample(): Map<string, RawTensor> {
  const f32 = Float32Array.of(1, -2.5, 3.14159, 1e-40, -0, 65504.5, Infinity, NaN);
  return new Map<string, RawTensor>([
    ["f32", { dtype: "F32", shape: [2, 4], data: f32 }],
    ["bf16", { dtype: "BF16", shape: [256, 256], data: allPatterns() }],
    ["f16", { dtype: "F16", shape: [65536], data: allPatterns() }],
    ["empty", { dtype: "BF16", shape: [0, 3], data: new Uint16Array(0) }],
  ]);
}

function assertRawEqual(got: RawTensor | undefined, want: RawTensor, name: string): void {
  assert.ok(got, `${name} missing`);
  assert.equal(got.dtype, want.dtype, name);
  assert.deepEqual(got.shape, want.shape, name);
  assert.equal(got.data.constructor, want.data.constructor, name);
  if (want.data instanceof Float32Array) assert.deepEqual(bitsOf(got.data as Float32Array), bitsOf(want.data), name);
  else assert.deepEqual(got.data, want.data, name);
}

test("raw round trip per dtype: each tensor keeps its dtype, type and exact bits (NaN payloads too)", () => {
  const tensors = sample();
  for (const [name, t] of tensors) {
    const dir = tmp();
    saveModelWeights(dir, { [name]: t }); // no dtype: the tensor's own
    const file = path.join(dir, "model.safetensors");
    assert.equal(headerOf(fs.readFileSync(file))[name].dtype, t.dtype);
    const back = loadModelWeightsRaw(dir);
    assert.deepEqual([...back.keys()], [name]);
    assertRawEqual(back.get(name), t, name);
    // Each tensor owns its buffer: nothing keeps the file's bytes alive.
    const d = back.get(name)!.data;
    assert.equal(d.byteOffset, 0);
    assert.equal(d.buffer.byteLength, d.byteLength);
    // Written again: the same bytes.
    const again = tmp();
    saveModelWeights(again, back);
    assert.deepEqual(fs.readFileSync(path.join(again, "model.safetensors")), fs.readFileSync(file));
    // The float32 view of the same file is the widened raw data.
    const wide = loadModelWeights(dir).get(name)!;
    assert.equal(wide.dtype, t.dtype);
    assert.deepEqual(bitsOf(wide.data), bitsOf(toFloat32(t)));
  }
  // All of them in one file, mixed dtypes, through every reader.
  const bytes = serializeSafetensors(tensors, { metadata: { format: "pt" } });
  const header = headerOf(bytes);
  for (const [name, t] of tensors) assert.equal(header[name].dtype, t.dtype);
  const parsed = parseSafetensorsRaw(bytes, "mem");
  assert.deepEqual(parsed.metadata, { format: "pt" });
  const file = path.join(tmp(), "all.safetensors");
  writeSafetensorsFile(file, tensors, { metadata: { format: "pt" } });
  assert.ok(!fs.existsSync(file + ".tmp"));
  assert.deepEqual(new Uint8Array(fs.readFileSync(file)), bytes);
  const read = readSafetensorsFileRaw(file);
  for (const [name, t] of tensors) {
    assertRawEqual(parsed.tensors.get(name), t, name);
    assertRawEqual(read.tensors.get(name), t, name);
  }
});

test("bf16 kept raw is bit-exact: every pattern survives load -> save -> load, file byte-identical", () => {
  const dir = tmp();
  const data = allPatterns();
  saveModelWeights(dir, { w: { dtype: "BF16", shape: [65536], data } }, { dtype: "BF16" });
  const first = fs.readFileSync(path.join(dir, "model.safetensors"));
  const raw = loadModelWeightsRaw(dir).get("w")!;
  assert.ok(raw.data instanceof Uint16Array);
  for (let h = 0; h < 65536; h++) assert.equal(raw.data[h], h);
  const out = tmp();
  saveModelWeights(out, new Map([["w", raw]]));
  assert.deepEqual(fs.readFileSync(path.join(out, "model.safetensors")), first);
  // Through float32 the NaN payloads would not all survive; raw keeps them.
  const viaFloat = fromFloat32(toFloat32(raw), "BF16") as Uint16Array;
  for (let h = 0; h < 65536; h++) if (!isBF16NaN(h)) assert.equal(viaFloat[h], h);
});

test("conversion on write: bf16 <-> f16 <-> f32, rounding to nearest even", () => {
  const pats = allPatterns();
  const bf: RawTensor = { dtype: "BF16", shape: [65536], data: pats };
  const hf: RawTensor = { dtype: "F16", shape: [65536], data: pats };
  const bfValues = toFloat32(bf),
    hfValues = toFloat32(hf);
  const readAs = (t: RawTensor, dtype: DType) =>
    parseSafetensorsRaw(serializeSafetensors({ t }, { dtype }), "m").tensors.get("t")!;

  // To F32: exact widening.
  const bf32 = readAs(bf, "F32"),
    hf32 = readAs(hf, "F32");
  assert.equal(bf32.dtype, "F32");
  assert.ok(bf32.data instanceof Float32Array && hf32.data instanceof Float32Array);
  for (let h = 0; h < 65536; h++) {
    assert.equal(new Uint32Array(bf32.data.buffer)[h], (h << 16) >>> 0);
    if (!isF16NaN(h)) assert.ok(Object.is(hf32.data[h], hfValues[h]), `f16 ${h}`);
    else assert.ok(Number.isNaN(hf32.data[h]));
  }
  // BF16 -> F16 and F16 -> BF16: one rounding from the exact value.
  const bfToHf = readAs(bf, "F16"),
    hfToBf = readAs(hf, "BF16");
  assert.equal(bfToHf.dtype, "F16");
  assert.equal(hfToBf.dtype, "BF16");
  for (let h = 0; h < 65536; h++) {
    assert.equal(bfToHf.data[h], f32BitsToF16((h << 16) >>> 0), `bf16 ${h}`);
    assert.equal(hfToBf.data[h], f32BitsToBF16(f32Bits(hfValues[h])), `f16 ${h}`);
  }
  // Spot checks by hand: bf16 1.0 -> f16 0x3c00; bf16 65536 (0x4780) overflows f16 -> inf; f16 1/3 (0x3555) -> bf16 0x3eab.
  assert.equal(bfToHf.data[0x3f80], 0x3c00);
  assert.equal(bfToHf.data[0x4780], 0x7c00);
  assert.equal(hfToBf.data[0x3555], 0x3eab);
  // Same dtype: written as is (NaN payloads kept).
  assert.deepEqual(readAs(bf, "BF16").data, pats);
  assert.deepEqual(readAs(hf, "F16").data, pats);
  // Float32 data to 16 bits matches the float path.
  const host: HostTensor = { shape: [65536], data: bfValues };
  assert.deepEqual(readAs(host as RawTensor, "F16").data, bfToHf.data);
  // And the float32 reader widens what the raw writer wrote.
  assert.deepEqual(
    bitsOf(readSafetensorsFile(writeTo(serializeSafetensors({ t: hf }))).tensors.get("t")!.data),
    bitsOf(hfValues),
  );
});

function writeTo(bytes: Uint8Array): string {
  const file = path.join(tmp(), "x.safetensors");
  fs.writeFileSync(file, bytes);
  return file;
}

test("default output dtype: the raw tensors' own when they agree, per tensor when mixed, F32 for float data", () => {
  const bf = (n: number): RawTensor => ({ dtype: "BF16", shape: [n], data: new Uint16Array(n).fill(0x3f80) });
  const agree = headerOf(serializeSafetensors({ a: bf(2), b: bf(3) }));
  assert.deepEqual([agree.a.dtype, agree.b.dtype], ["BF16", "BF16"]);
  const mixed = headerOf(
    serializeSafetensors({
      a: bf(2),
      b: { dtype: "F16", shape: [1], data: Uint16Array.of(0x3c00) },
      c: { dtype: "F32", shape: [1], data: Float32Array.of(1) },
      d: { shape: [1], data: Float32Array.of(1) },
      // A float32 tensor loaded from a BF16 file: float values, written as F32 as before.
      e: { dtype: "BF16", shape: [1], data: Float32Array.of(1) },
    }),
  );
  assert.deepEqual(
    ["a", "b", "c", "d", "e"].map((k) => mixed[k].dtype),
    ["BF16", "F16", "F32", "F32", "F32"],
  );
  // An explicit dtype applies to all.
  const all = headerOf(
    serializeSafetensors({ a: bf(2), c: { shape: [1], data: Float32Array.of(1) } }, { dtype: "F16" }),
  );
  assert.deepEqual([all.a.dtype, all.c.dtype], ["F16", "F16"]);
  // 16-bit data must say which 16-bit dtype it is.
  assert.throws(
    () => serializeSafetensors({ w: { dtype: "F32", shape: [1], data: new Uint16Array(1) } }),
    (e: unknown) => e instanceof ModelFormatError && e.field === "w" && /BF16 or F16/.test(e.message),
  );
  assert.throws(() => toFloat32({ dtype: "F32", shape: [1], data: new Uint16Array(1) }), AgentR1Error);
});

test("sharded raw save and load: shards sized by each tensor's dtype, same tensors back", () => {
  const dir = tmp();
  const mk = (dtype: DType, n: number, k: number): RawTensor =>
    dtype === "F32"
      ? { dtype, shape: [n], data: Float32Array.from({ length: n }, (_, i) => i * k + 0.25) }
      : { dtype, shape: [n], data: Uint16Array.from({ length: n }, (_, i) => (i * 977 + k) & 0xffff) };
  const tensors = new Map<string, RawTensor>([
    ["a.weight", mk("BF16", 100, 1)],
    ["b.weight", mk("BF16", 100, 2)],
    ["c.bias", mk("F32", 50, 3)],
    ["d.weight", mk("F16", 60, 4)],
  ]);
  saveModelWeights(dir, tensors, { maxShardBytes: 320, metadata: { step: "3" } });
  const files = fs.readdirSync(dir).sort();
  assert.deepEqual(files, [
    "model-00001-of-00003.safetensors",
    "model-00002-of-00003.safetensors",
    "model-00003-of-00003.safetensors",
    "model.safetensors.index.json",
  ]);
  const index = JSON.parse(fs.readFileSync(path.join(dir, "model.safetensors.index.json"), "utf8"));
  assert.equal(index.metadata.total_size, 200 + 200 + 200 + 120);
  assert.deepEqual(index.weight_map, {
    "a.weight": "model-00001-of-00003.safetensors",
    "b.weight": "model-00002-of-00003.safetensors",
    "c.bias": "model-00003-of-00003.safetensors",
    "d.weight": "model-00003-of-00003.safetensors",
  });
  const raw = loadModelWeightsRaw(dir);
  assert.deepEqual([...raw.keys()].sort(), [...tensors.keys()].sort());
  for (const [name, t] of tensors) assertRawEqual(raw.get(name), t, name);
  const wide = loadModelWeights(dir);
  for (const [name, t] of tensors) assert.deepEqual(bitsOf(wide.get(name)!.data), bitsOf(toFloat32(t)), name);
  // A tensor present in a shard but not in the index is not returned, as with loadModelWeights.
  const shard3 = path.join(dir, "model-00003-of-00003.safetensors");
  writeSafetensorsFile(shard3, {
    "c.bias": tensors.get("c.bias")!,
    "d.weight": tensors.get("d.weight")!,
    extra: mk("F32", 2, 9),
  });
  assert.ok(!loadModelWeightsRaw(dir).has("extra"));
  assert.ok(!loadModelWeights(dir).has("extra"));
  // Writing as F32 converts every tensor and resizes the shards.
  const out = tmp();
  saveModelWeights(out, raw, { dtype: "F32" });
  const back = loadModelWeightsRaw(out);
  for (const [name, t] of tensors) {
    assert.equal(back.get(name)!.dtype, "F32");
    assert.deepEqual(bitsOf(back.get(name)!.data as Float32Array), bitsOf(toFloat32(t)), name);
  }
});

test("toFloat32 / fromFloat32", () => {
  const f = Float32Array.of(1, -2, 0.1);
  assert.equal(toFloat32({ dtype: "F32", shape: [3], data: f }), f); // not copied
  assert.equal(fromFloat32(f, "F32"), f);
  const vals = Float32Array.of(1, 1.00390625, 1.01171875, -0, 65520, 2 ** -25, 1e-45, NaN);
  const bf = fromFloat32(vals, "BF16") as Uint16Array,
    hf = fromFloat32(vals, "F16") as Uint16Array;
  assert.ok(bf instanceof Uint16Array && hf instanceof Uint16Array);
  for (let i = 0; i < vals.length; i++) {
    const b = f32Bits(vals[i]);
    assert.equal(bf[i], f32BitsToBF16(b));
    assert.equal(hf[i], f32BitsToF16(b));
  }
  assert.deepEqual([...bf.subarray(0, 4)], [0x3f80, 0x3f80, 0x3f82, 0x8000]); // halfway cases to even
  assert.deepEqual([...hf.subarray(3, 6)], [0x8000, 0x7c00, 0x0000]);
  const back = toFloat32({ dtype: "BF16", shape: [8], data: bf });
  assert.deepEqual([...back.subarray(0, 4)], [1, 1, 1.015625, -0]);
  assert.ok(Number.isNaN(back[7]));
  const h = toFloat32({ dtype: "F16", shape: [8], data: hf });
  assert.deepEqual([...h.subarray(0, 3)], [1, 1.00390625, 1.01171875]);
});

/** Both loaders must fail the same way: a ModelFormatError with the same file, field and message. */
function assertBothFail(dir: string, file: string, field: string | undefined, re: RegExp): void {
  const errs = [loadModelWeights, loadModelWeightsRaw].map((load) => {
    try {
      load(dir);
    } catch (e) {
      return e;
    }
    assert.fail(`${load.name} did not throw for ${dir}`);
  });
  for (const e of errs) {
    assert.ok(e instanceof ModelFormatError, String(e));
    assert.equal(e.file, file);
    assert.equal(e.field, field);
    assert.match(e.message, re);
    assert.ok(!e.message.includes("\n"), e.message);
  }
  assert.equal((errs[0] as Error).message, (errs[1] as Error).message);
}

test("the malformed-file errors of loadModelWeights come from loadModelWeightsRaw too", () => {
  const rawFile = (header: unknown, data: number[] = [], text?: string) => {
    const json = new TextEncoder().encode(text ?? JSON.stringify(header));
    const out = new Uint8Array(8 + json.length + data.length);
    new DataView(out.buffer).setBigUint64(0, BigInt(json.length), true);
    out.set(json, 8);
    out.set(data, 8 + json.length);
    return out;
  };
  const single = (bytes: Uint8Array) => {
    const dir = tmp();
    fs.writeFileSync(path.join(dir, "model.safetensors"), bytes);
    return [dir, path.join(dir, "model.safetensors")] as const;
  };
  const zeros = (n: number) => new Array(n).fill(0);
  const cases: [Uint8Array, string | undefined, RegExp][] = [
    [new Uint8Array([1, 2, 3]), undefined, /truncated: 3 bytes/],
    [
      rawFile({ t: { dtype: "BF16", shape: [4], data_offsets: [0, 8] } }, zeros(8)).subarray(0, 20),
      undefined,
      /truncated/,
    ],
    [rawFile(undefined, [], '{"t": {"dtype": "BF16",'), "header", /JSON/],
    [rawFile([1, 2]), "header", /object/],
    [rawFile({ w: { dtype: "BF16", shape: [4], data_offsets: [4, 12] } }, zeros(8)), "w", /outside/],
    [
      rawFile({ w: { dtype: "BF16", shape: [3], data_offsets: [0, 8] } }, zeros(8)),
      "w",
      /8 bytes but BF16 x \[3\] needs 6/,
    ],
    [rawFile({ w: { dtype: "F16", shape: [-1], data_offsets: [0, 0] } }), "w", /shape/],
    [rawFile({ ids: { dtype: "I64", shape: [1], data_offsets: [0, 8] } }, zeros(8)), "ids", /unsupported dtype "I64"/],
    [rawFile({ __metadata__: { a: 1 } }), "__metadata__", /string values/],
  ];
  for (const [bytes, field, re] of cases) {
    const [dir, file] = single(bytes);
    assertBothFail(dir, file, field, re);
  }
  // A directory where the file belongs.
  const dirAsFile = tmp();
  fs.mkdirSync(path.join(dirAsFile, "model.safetensors"));
  assertBothFail(dirAsFile, path.join(dirAsFile, "model.safetensors"), undefined, /is a directory/);

  const empty = tmp();
  assertBothFail(empty, empty, undefined, /no model\.safetensors or model\.safetensors\.index\.json found/);
  assertBothFail(path.join(empty, "absent"), path.join(empty, "absent"), undefined, /model\.safetensors/);

  const sharded = tmp();
  const bf = (n: number): RawTensor => ({ dtype: "BF16", shape: [n], data: new Uint16Array(n) });
  saveModelWeights(sharded, { a: bf(100), b: bf(100) }, { maxShardBytes: 200 });
  const idx = path.join(sharded, "model.safetensors.index.json");
  const goodIndex = fs.readFileSync(idx, "utf8");
  fs.rmSync(path.join(sharded, "model-00002-of-00002.safetensors"));
  assertBothFail(sharded, idx, "b", /shard model-00002-of-00002\.safetensors not found/);
  fs.writeFileSync(idx, "{ not json");
  assertBothFail(sharded, idx, undefined, /not valid JSON/);
  fs.writeFileSync(idx, JSON.stringify({ weight_map: [] }));
  assertBothFail(sharded, idx, "weight_map", /must be an object/);
  fs.writeFileSync(idx, JSON.stringify({ weight_map: { a: "../model-00001-of-00002.safetensors" } }));
  assertBothFail(sharded, idx, "a", /file name in the model directory/);
  fs.writeFileSync(
    idx,
    JSON.stringify({ weight_map: { a: "model-00001-of-00002.safetensors", zz: "model-00001-of-00002.safetensors" } }),
  );
  assertBothFail(sharded, path.join(sharded, "model-00001-of-00002.safetensors"), "zz", /not in this shard/);
  // A shard cut short after its header.
  fs.writeFileSync(idx, goodIndex);
  saveModelWeights(sharded, { a: bf(100), b: bf(100) }, { maxShardBytes: 200 });
  const shard = path.join(sharded, "model-00002-of-00002.safetensors");
  fs.truncateSync(shard, fs.statSync(shard).size - 10);
  assertBothFail(sharded, shard, "b", /outside the 190-byte data section/);
});
