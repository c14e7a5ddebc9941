import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import {
  type HostTensor,
  loadModelWeights,
  parseSafetensors,
  readSafetensorsFile,
  saveModelWeights,
  serializeSafetensors,
  writeSafetensorsFile,
} from "../src/model/safetensors.js";
import { ModelFormatError } from "../src/util/errors.js";

const tmp = () => fs.mkdtempSync(path.join(os.tmpdir(), "agent-r1-st-"));
const f32 = (vals: number[]) => Float32Array.from(vals);
const fromBits = (bits: number[]) => new Float32Array(Uint32Array.from(bits).buffer);
const bitsOf = (a: Float32Array) => [...new Uint32Array(a.buffer, a.byteOffset, a.length)];

/** Builds a file byte by byte: u64 LE header length, header JSON (unpadded), data. */
function rawFile(header: unknown, data: number[] = [], headerText?: string): Uint8Array {
  const json = new TextEncoder().encode(headerText ?? JSON.stringify(header));
  const out = new Uint8Array(8 + json.length + data.length);
  new DataView(out.buffer).setBigUint64(0, BigInt(json.length), true);
  out.set(json, 8);
  out.set(data, 8 + json.length);
  return out;
}

function headerOf(bytes: Uint8Array): { len: number; json: Record<string, any>; data: Uint8Array } {
  const len = Number(new DataView(bytes.buffer, bytes.byteOffset).getBigUint64(0, true));
  const json = JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + len)));
  return { len, json, data: bytes.subarray(8 + len) };
}

/** u16 values in the data section, read little-endian. */
function u16s(bytes: Uint8Array): number[] {
  const { data } = headerOf(bytes);
  const dv = new DataView(data.buffer, data.byteOffset, data.byteLength);
  return Array.from({ length: data.length / 2 }, (_, i) => dv.getUint16(2 * i, true));
}

function assertFormatError(fn: () => unknown, file: string, field: string | undefined, re?: RegExp): void {
  assert.throws(fn, (e: unknown) => {
    assert.ok(e instanceof ModelFormatError, `expected ModelFormatError, got ${String(e)}`);
    assert.equal(e.file, file);
    assert.equal(e.field, field);
    assert.ok(e.message.includes(file), e.message);
    if (field) assert.ok(e.message.includes(`(${field})`), e.message);
    if (re) assert.match(e.message, re);
    return true;
  });
}

test("fp32 round trip is byte-identical, values exact, metadata kept", () => {
  const tensors: Record<string, HostTensor> = {
    "model.embed.weight": { shape: [2, 3], data: f32([1, -2.5, 3.14159, 1e-40, -0, 65504.5]) },
    "lm_head.weight": { shape: [3], data: fromBits([0x7f800000, 0xff800000, 0x00000001]) },
    scalar: { shape: [], data: f32([42]) },
    empty: { shape: [0, 4], data: new Float32Array(0) },
  };
  const a = serializeSafetensors(tensors, { metadata: { format: "pt", note: "héllo" } });
  const parsed = parseSafetensors(a, "mem");
  assert.deepEqual(parsed.metadata, { format: "pt", note: "héllo" });
  for (const [name, t] of Object.entries(tensors)) {
    const got = parsed.tensors.get(name)!;
    assert.equal(got.dtype, "F32");
    assert.deepEqual(got.shape, t.shape);
    assert.deepEqual(bitsOf(got.data), bitsOf(t.data));
  }
  const b = serializeSafetensors(parsed.tensors, { metadata: parsed.metadata });
  assert.deepEqual(b, a);
  // Through the file system too.
  const file = path.join(tmp(), "x.safetensors");
  writeSafetensorsFile(file, parsed.tensors, { metadata: parsed.metadata });
  assert.ok(!fs.existsSync(file + ".tmp"));
  assert.deepEqual(new Uint8Array(fs.readFileSync(file)), a);
  assert.deepEqual(readSafetensorsFile(file).metadata, parsed.metadata);
});

test("header is 8-aligned, space-padded, tensors sorted and contiguous", () => {
  for (let extra = 0; extra < 9; extra++) {
    const t = new Map<string, HostTensor>([
      ["zeta" + "x".repeat(extra), { shape: [1], data: f32([1]) }],
      ["alpha", { shape: [2], data: f32([2, 3]) }],
      ["Mid", { shape: [3], data: f32([4, 5, 6]) }],
    ]);
    for (const dtype of ["F32", "BF16", "F16"] as const) {
      const bytes = serializeSafetensors(t, { dtype });
      const { len, json, data } = headerOf(bytes);
      assert.equal((8 + len) % 8, 0);
      const raw = new TextDecoder().decode(bytes.subarray(8, 8 + len));
      assert.match(raw, /^\{.*\} *$/);
      const names = Object.keys(json);
      assert.deepEqual(names, [...names].sort());
      let off = 0;
      for (const n of names) {
        assert.equal(json[n].dtype, dtype);
        assert.equal(json[n].data_offsets[0], off);
        off = json[n].data_offsets[1];
      }
      assert.equal(off, data.length);
    }
  }
});

test("BF16 encoding: exact bits with round-to-nearest-even, NaN stays NaN", () => {
  const input = fromBits([
    0x3f800000, // 1.0 -> 0x3F80
    0xc0200000, // -2.5 -> 0xC020
    0x3f808000, // halfway, lower even -> 0x3F80
    0x3f818000, // halfway, lower odd -> 0x3F82
    0x3f808001, // just above halfway -> 0x3F81
    0x7fc00000, // NaN
    0x7f800001, // signalling NaN must not become Inf
    0x7f7fffff, // max float rounds to Inf
  ]);
  const bytes = serializeSafetensors({ x: { shape: [8], data: input } }, { dtype: "BF16" });
  const h = u16s(bytes);
  assert.deepEqual(h.slice(0, 5), [0x3f80, 0xc020, 0x3f80, 0x3f82, 0x3f81]);
  for (const n of [h[5], h[6]]) assert.ok((n & 0x7f80) === 0x7f80 && (n & 0x7f) !== 0, n.toString(16));
  assert.equal(h[7], 0x7f80);
  const back = parseSafetensors(bytes, "mem").tensors.get("x")!;
  assert.equal(back.dtype, "BF16");
  assert.deepEqual([...back.data.slice(0, 5)], [1, -2.5, 1, 1.015625, 1.0078125]);
  assert.ok(Number.isNaN(back.data[5]) && Number.isNaN(back.data[6]));
  assert.equal(back.data[7], Infinity);
});

test("BF16 decoding of a hand-built file (unaligned data) and every 16-bit pattern", () => {
  const file = rawFile(
    { t: { dtype: "BF16", shape: [2, 2], data_offsets: [0, 8] } },
    [0x80, 0x3f, 0x20, 0xc0, 0x80, 0x7f, 0x00, 0x80],
  );
  const t = parseSafetensors(file, "hand").tensors.get("t")!;
  assert.deepEqual(t.shape, [2, 2]);
  assert.deepEqual([...t.data], [1, -2.5, Infinity, -0]);
  // All 65536 patterns decode to the widened float and re-encode to themselves (NaNs stay NaN).
  const all = new Uint8Array(65536 * 2);
  for (let h = 0; h < 65536; h++) {
    all[2 * h] = h & 0xff;
    all[2 * h + 1] = h >> 8;
  }
  const dec = parseSafetensors(
    rawFile({ a: { dtype: "BF16", shape: [65536], data_offsets: [0, all.length] } }, [...all]),
    "all",
  ).tensors.get("a")!;
  const enc = u16s(serializeSafetensors({ a: dec }, { dtype: "BF16" }));
  for (let h = 0; h < 65536; h++) {
    const nan = (h & 0x7f80) === 0x7f80 && (h & 0x7f) !== 0;
    if (nan) assert.ok(Number.isNaN(dec.data[h]) && Number.isNaN(fromBits([enc[h] << 16])[0]));
    else {
      assert.equal(bitsOf(dec.data.subarray(h, h + 1))[0], (h << 16) >>> 0);
      assert.equal(enc[h], h);
    }
  }
});

test("F32 data at an unaligned offset inside a larger buffer decodes exactly", () => {
  const vals = f32([1.5, -3, 1e-30]);
  const file = rawFile({ w: { dtype: "F32", shape: [3], data_offsets: [1, 13] } }, [
    0xaa,
    ...new Uint8Array(vals.buffer),
  ]);
  const outer = new Uint8Array(file.length + 3);
  outer.set(file, 3);
  const t = parseSafetensors(outer.subarray(3), "odd").tensors.get("w")!;
  assert.deepEqual(bitsOf(t.data), bitsOf(vals));
});

test("F16 encoding: normals, max, subnormals, rounding, inf, nan", () => {
  const cases: [number, number][] = [
    [1, 0x3c00],
    [-2, 0xc000],
    [65504, 0x7bff],
    [65519, 0x7bff],
    [65520, 0x7c00],
    [1e6, 0x7c00],
    [2 ** -14, 0x0400],
    [2 ** -24, 0x0001],
    [2 ** -25, 0x0000],
    [1.5 * 2 ** -25, 0x0001],
    [3 * 2 ** -25, 0x0002],
    [1023 * 2 ** -24, 0x03ff],
    [1023.5 * 2 ** -24, 0x0400],
    [1e-10, 0],
    [-(2 ** -24), 0x8001],
    [1 / 3, 0x3555],
    [1 + 2 ** -11, 0x3c00],
    [1 + 3 * 2 ** -11, 0x3c02],
    [-0, 0x8000],
    [Infinity, 0x7c00],
    [-Infinity, 0xfc00],
  ];
  const data = f32([...cases.map((c) => c[0]), NaN]);
  const bytes = serializeSafetensors({ x: { shape: [data.length], data } }, { dtype: "F16" });
  const h = u16s(bytes);
  cases.forEach(([v, want], i) =>
    assert.equal(h[i], want, `${v} -> 0x${h[i].toString(16)}, want 0x${want.toString(16)}`),
  );
  const nan = h[cases.length];
  assert.ok((nan & 0x7c00) === 0x7c00 && (nan & 0x3ff) !== 0);
  const back = parseSafetensors(bytes, "mem").tensors.get("x")!;
  assert.equal(back.data[0], 1);
  assert.equal(back.data[2], 65504);
  assert.equal(back.data[7], 2 ** -24);
  assert.ok(Number.isNaN(back.data[cases.length]));
  // Random floats: the chosen half is never farther than its neighbours.
  let seed = 12345;
  const rnd = () => (seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32;
  const vals = f32(Array.from({ length: 5000 }, () => (rnd() - 0.5) * 2 ** (Math.floor(rnd() * 43) - 26)));
  const enc = u16s(serializeSafetensors({ v: { shape: [vals.length], data: vals } }, { dtype: "F16" }));
  const nb = new Uint8Array(enc.length * 6);
  enc.forEach((e, i) =>
    [e, (e & 0x8000) | Math.max((e & 0x7fff) - 1, 0), e + 1].forEach((x, j) => {
      nb[6 * i + 2 * j] = x & 0xff;
      nb[6 * i + 2 * j + 1] = (x >> 8) & 0xff;
    }),
  );
  const d = parseSafetensors(
    rawFile({ d: { dtype: "F16", shape: [nb.length / 2], data_offsets: [0, nb.length] } }, [...nb]),
    "nb",
  ).tensors.get("d")!.data;
  vals.forEach((v, i) => {
    const err = Math.abs(v - d[3 * i]);
    assert.ok(err <= Math.abs(v - d[3 * i + 1]) && err <= Math.abs(v - d[3 * i + 2]), `${v}`);
  });
});

test("F16 decoding of a hand-built file and every 16-bit pattern round trip", () => {
  const file = rawFile(
    { t: { dtype: "F16", shape: [5], data_offsets: [0, 10] } },
    [0x00, 0x3c, 0xff, 0x7b, 0x01, 0x00, 0x00, 0x7c, 0x00, 0x7e],
  );
  const t = parseSafetensors(file, "hand").tensors.get("t")!;
  assert.deepEqual([...t.data.slice(0, 4)], [1, 65504, 2 ** -24, Infinity]);
  assert.ok(Number.isNaN(t.data[4]));
  const all = new Uint8Array(65536 * 2);
  for (let h = 0; h < 65536; h++) {
    all[2 * h] = h & 0xff;
    all[2 * h + 1] = h >> 8;
  }
  const dec = parseSafetensors(
    rawFile({ a: { dtype: "F16", shape: [65536], data_offsets: [0, all.length] } }, [...all]),
    "all",
  ).tensors.get("a")!;
  const enc = u16s(serializeSafetensors({ a: dec }, { dtype: "F16" }));
  for (let h = 0; h < 65536; h++) {
    if ((h & 0x7c00) === 0x7c00 && (h & 0x3ff) !== 0) assert.ok(Number.isNaN(dec.data[h]) && (enc[h] & 0x3ff) !== 0);
    else assert.equal(enc[h], h);
  }
});

test("sharded save forces 3 shards and loads back identically", () => {
  const dir = tmp();
  const mk = (n: number, k: number) => ({ shape: [n], data: f32(Array.from({ length: n }, (_, i) => i * k + 0.25)) });
  const tensors = { "b.weight": mk(100, 1), "a.weight": mk(100, 2), "c.bias": mk(100, 3), "c.scale": mk(10, 4) };
  saveModelWeights(dir, { x: mk(3, 1) }); // earlier single-file save must not shadow the shards
  assert.ok(fs.existsSync(path.join(dir, "model.safetensors")));
  saveModelWeights(dir, tensors, { maxShardBytes: 500, metadata: { step: "7" } });
  const files = fs.readdirSync(dir).sort();
  assert.deepEqual(files, [
    "model-00001-of-00003.safetensors",
    "model-00002-of-00003.safetensors",
    "model-00003-of-00003.safetensors",
    "model.safetensors.index.json",
  ]);
  const index = JSON.parse(fs.readFileSync(path.join(dir, "model.safetensors.index.json"), "utf8"));
  assert.equal(index.metadata.total_size, 310 * 4);
  assert.deepEqual(index.weight_map, {
    "a.weight": "model-00001-of-00003.safetensors",
    "b.weight": "model-00002-of-00003.safetensors",
    "c.bias": "model-00003-of-00003.safetensors",
    "c.scale": "model-00003-of-00003.safetensors",
  });
  assert.deepEqual(readSafetensorsFile(path.join(dir, files[0])).metadata, { format: "pt", step: "7" });
  const loaded = loadModelWeights(dir);
  assert.deepEqual([...loaded.keys()].sort(), Object.keys(tensors).sort());
  for (const [name, t] of Object.entries(tensors)) {
    assert.deepEqual(loaded.get(name)!.shape, t.shape);
    assert.deepEqual(loaded.get(name)!.data, t.data);
  }
  // Back to one file: the index and shards are removed.
  saveModelWeights(dir, tensors, { dtype: "BF16" });
  assert.deepEqual(fs.readdirSync(dir), ["model.safetensors"]);
  const bf = loadModelWeights(dir);
  assert.equal(bf.get("c.scale")!.dtype, "BF16");
  assert.equal(bf.get("c.scale")!.data[1], 4.25);
});

test("errors are ModelFormatErrors naming the file and the field", () => {
  const dir = tmp();
  const put = (name: string, bytes: Uint8Array | string) => {
    const p = path.join(dir, name);
    fs.writeFileSync(p, bytes);
    return p;
  };
  const good = { t: { dtype: "F32", shape: [2], data_offsets: [0, 8] } };

  const short = put("short.safetensors", new Uint8Array([1, 2, 3]));
  assertFormatError(() => readSafetensorsFile(short), short, undefined, /truncated/);
  const cut = put("cut.safetensors", rawFile(good, [0, 0, 0, 0, 0, 0, 0, 0]).subarray(0, 20));
  assertFormatError(() => readSafetensorsFile(cut), cut, undefined, /truncated/);

  const badJson = put("bad.safetensors", rawFile(undefined, [], '{"t": {"dtype": "F32",'));
  assertFormatError(() => readSafetensorsFile(badJson), badJson, "header", /JSON/);
  const notObj = put("arr.safetensors", rawFile([1, 2]));
  assertFormatError(() => readSafetensorsFile(notObj), notObj, "header", /object/);

  const oob = put(
    "oob.safetensors",
    rawFile({ "layer.0.w": { dtype: "F32", shape: [2], data_offsets: [4, 12] } }, [0, 0, 0, 0, 0, 0, 0, 0]),
  );
  assertFormatError(() => readSafetensorsFile(oob), oob, "layer.0.w", /outside/);
  const neg = put(
    "neg.safetensors",
    rawFile({ w: { dtype: "F32", shape: [2], data_offsets: [8, 0] } }, new Array(8).fill(0)),
  );
  assertFormatError(() => readSafetensorsFile(neg), neg, "w", /outside/);
  const size = put(
    "size.safetensors",
    rawFile({ w: { dtype: "F16", shape: [3], data_offsets: [0, 8] } }, new Array(8).fill(0)),
  );
  assertFormatError(() => readSafetensorsFile(size), size, "w", /8 bytes but F16 x \[3\] needs 6/);
  const shape = put("shape.safetensors", rawFile({ w: { dtype: "F32", shape: [-1], data_offsets: [0, 0] } }));
  assertFormatError(() => readSafetensorsFile(shape), shape, "w", /shape/);

  const i64 = put(
    "i64.safetensors",
    rawFile({ ids: { dtype: "I64", shape: [1], data_offsets: [0, 8] } }, new Array(8).fill(0)),
  );
  assertFormatError(() => readSafetensorsFile(i64), i64, "ids", /unsupported dtype "I64"/);

  const proto = put("proto.safetensors", rawFile({ w: { dtype: "toString", shape: [0], data_offsets: [0, 0] } }));
  assertFormatError(() => readSafetensorsFile(proto), proto, "w", /unsupported dtype "toString"/);

  const meta = put("meta.safetensors", rawFile({ __metadata__: { a: 1 } }));
  assertFormatError(() => readSafetensorsFile(meta), meta, "__metadata__");

  const missing = path.join(dir, "nope.safetensors");
  assertFormatError(() => readSafetensorsFile(missing), missing, undefined, /not found/);

  const emptyDir = tmp();
  assertFormatError(
    () => loadModelWeights(emptyDir),
    emptyDir,
    undefined,
    /model\.safetensors or model\.safetensors\.index\.json/,
  );
  assertFormatError(
    () => loadModelWeights(path.join(emptyDir, "absent")),
    path.join(emptyDir, "absent"),
    undefined,
    /model\.safetensors/,
  );

  const sharded = tmp();
  saveModelWeights(
    sharded,
    { a: { shape: [100], data: new Float32Array(100) }, b: { shape: [100], data: new Float32Array(100) } },
    { maxShardBytes: 400 },
  );
  fs.rmSync(path.join(sharded, "model-00002-of-00002.safetensors"));
  const idx = path.join(sharded, "model.safetensors.index.json");
  assertFormatError(() => loadModelWeights(sharded), idx, "b", /shard model-00002-of-00002\.safetensors not found/);
  fs.writeFileSync(idx, "{ not json");
  assertFormatError(() => loadModelWeights(sharded), idx, undefined, /not valid JSON/);
  fs.writeFileSync(
    idx,
    JSON.stringify({ weight_map: { a: "model-00001-of-00002.safetensors", zz: "model-00001-of-00002.safetensors" } }),
  );
  assertFormatError(
    () => loadModelWeights(sharded),
    path.join(sharded, "model-00001-of-00002.safetensors"),
    "zz",
    /not in this shard/,
  );

  assertFormatError(
    () => serializeSafetensors({ w: { shape: [3], data: new Float32Array(2) } }),
    "safetensors",
    "w",
    /shape/,
  );
});
