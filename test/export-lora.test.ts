/**
 * `agent-r1 export` through the CLI on a tiny bf16 Qwen2 model made here: weights keep their
 * stored dtype unless --dtype converts them; LoRA adapters export in PEFT's layout (read back
 * identically) or, with --merge, as full weights equal to W + scale · B·A computed here (and, on
 * the native engine, giving the LoRA model's logprobs); bad input is one line and writes nothing.
 */
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { copyFileSync, existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { readModelConfig, TOKENIZER_FILES } from "../src/model/model-dir.js";
import type { ModelConfig } from "../src/model/config.js";
import {
  ADAPTER_CONFIG_FILE,
  ADAPTER_WEIGHTS_FILE,
  readPeftAdapter,
  writePeftAdapter,
  type LoraAdapters,
  type LoraSpec,
} from "../src/model/peft.js";
import { readSafetensorsFileRaw, toFloat32, writeSafetensorsFile, type RawTensor } from "../src/model/safetensors.js";
import { writeCheckpoint } from "../src/train/checkpoint.js";
import { LocalEngine } from "../src/engine/local/local-engine.js";
import { runCli } from "../src/cli/main.js";
import { Rng } from "../src/util/rng.js";
import { captureIO, tempDir } from "./helpers.js";
import { ENGINES } from "./engine-internals.js";
import { randomAdapters, tinyBf16Model, SMALL_LORA } from "./model-fixtures.js";

const skip = !ENGINES.includes("native") && "the native addon is not built";
const spec: LoraSpec = SMALL_LORA;
let root: string, base: string, config: ModelConfig, adapters: LoraAdapters, adapterDir: string;

/** Random non-zero adapters for every module the spec targets in a model shaped like `c`. */
const randomAdaptersFor = (c: ModelConfig, seed: number) => randomAdapters(c, spec, seed, 0.3);

before(async () => {
  root = tempDir("agent-r1-export-lora-");
  base = await tinyBf16Model(root, "base", 3);
  config = readModelConfig(base);
  adapters = randomAdaptersFor(config, 11);
  adapterDir = join(root, "adapter");
  writePeftAdapter(adapterDir, spec, adapters, { baseModel: base, config });
});

after(() => rmSync(root, { recursive: true, force: true }));

/** Runs `agent-r1 export ARGS`, expecting success; returns its stdout lines. */
async function exportOk(...args: string[]): Promise<string[]> {
  const io = captureIO();
  assert.equal(await runCli(["export", ...args], io), 0, io.stderr.join("\n"));
  return io.stdout;
}

/** Runs `agent-r1 export ARGS`, expecting exit 1 with one error line and `out` (and any temporary sibling) not written. */
async function exportFails(out: string, ...args: string[]): Promise<string> {
  const io = captureIO();
  assert.equal(await runCli(["export", "--out", out, ...args], io), 1, io.stdout.join("\n"));
  assert.equal(io.stderr.length, 1, io.stderr.join("\n"));
  assert.ok(!io.stderr[0].includes("\n"), io.stderr[0]);
  assert.ok(!existsSync(out), `${out} was written`);
  assert.deepEqual(
    readdirSync(dirname(out)).filter((f) => f.includes(".tmp-")),
    [],
  );
  return io.stderr[0];
}

const tensorsOf = (dir: string, file = "model.safetensors") => readSafetensorsFileRaw(join(dir, file)).tensors;
const bitsEqual = (a: RawTensor, b: RawTensor) =>
  a.dtype === b.dtype &&
  a.data.length === b.data.length &&
  Buffer.compare(
    Buffer.from(a.data.buffer, a.data.byteOffset, a.data.byteLength),
    Buffer.from(b.data.buffer, b.data.byteOffset, b.data.byteLength),
  ) === 0;

test("a bf16 model exported without --dtype stays bf16 bit for bit; --dtype f32 widens it exactly", async () => {
  const out = join(root, "same");
  const lines = await exportOk("--checkpoint", base, "--out", out);
  assert.match(lines[0], /\(bf16, from /);
  const want = tensorsOf(base),
    got = tensorsOf(out);
  assert.deepEqual([...got.keys()].sort(), [...want.keys()].sort());
  for (const [name, t] of want) {
    assert.equal(t.dtype, "BF16", name);
    assert.ok(bitsEqual(got.get(name)!, t), `${name} changed`);
  }
  assert.equal(readModelConfig(out).raw.torch_dtype, "bfloat16");
  for (const f of TOKENIZER_FILES)
    if (existsSync(join(base, f)))
      assert.equal(readFileSync(join(out, f), "utf8"), readFileSync(join(base, f), "utf8"));

  const wide = join(root, "wide");
  await exportOk("--checkpoint", base, "--out", wide, "--dtype", "f32");
  for (const [name, t] of tensorsOf(wide)) {
    assert.equal(t.dtype, "F32", name);
    assert.deepEqual(t.data, toFloat32(want.get(name)!), name);
  }
  assert.equal(readModelConfig(wide).raw.torch_dtype, "float32");
  // and a float32 model stays float32
  const again = join(root, "wide-again");
  await exportOk("--checkpoint", wide, "--out", again);
  for (const [name, t] of tensorsOf(again)) assert.ok(bitsEqual(t, tensorsOf(wide).get(name)!), name);
});

/** W + (alpha / r) · B·A for one module, in float64 from the stored (bf16) base, written out here rather than by peft.ts. */
function expectedMerge(w: Float32Array, a: Float32Array, b: Float32Array, rows: number, cols: number): Float64Array {
  const r = spec.rank,
    scale = spec.alpha / spec.rank;
  const out = new Float64Array(rows * cols);
  for (let o = 0; o < rows; o++)
    for (let i = 0; i < cols; i++) {
      let s = 0;
      for (let j = 0; j < r; j++) s += b[o * r + j] * a[j * cols + i];
      out[o * cols + i] = w[o * cols + i] + scale * s;
    }
  return out;
}

/** Every value of `got` within `rel` (relative) of `want`, plus a little absolute slack for values near zero. */
function assertClose(got: Float32Array, want: Float64Array, rel: number, what: string): void {
  assert.equal(got.length, want.length, what);
  for (let i = 0; i < want.length; i++) {
    const err = Math.abs(got[i] - want[i]);
    assert.ok(err <= rel * Math.abs(want[i]) + 1e-30, `${what}[${i}]: ${got[i]} vs ${want[i]}`);
  }
}

test("--merge writes W + scale · B·A into every adapted module, in the base's dtype or --dtype's", async () => {
  const merged = join(root, "merged");
  const lines = await exportOk("--checkpoint", adapterDir, "--out", merged, "--merge");
  assert.match(lines[0], /LoRA adapters merged into 14 modules .*bf16$/);
  const baseW = tensorsOf(base),
    mergedF32 = join(root, "merged-f32");
  await exportOk("--checkpoint", adapterDir, "--out", mergedF32, "--merge", "--dtype", "f32");
  const got = tensorsOf(merged),
    gotF32 = tensorsOf(mergedF32);
  assert.deepEqual([...got.keys()].sort(), [...baseW.keys()].sort());
  for (const [name, w] of baseW) {
    const path = name.replace(/\.weight$/, ""),
      ad = adapters.get(path);
    assert.equal(got.get(name)!.dtype, "BF16", name);
    assert.equal(gotF32.get(name)!.dtype, "F32", name);
    if (!ad) {
      assert.ok(bitsEqual(got.get(name)!, w), `${name} (not adapted) changed`);
      continue;
    }
    const [rows, cols] = w.shape;
    const want = expectedMerge(toFloat32(w), ad.a, ad.b, rows, cols);
    // bf16 keeps 8 significant bits: rounding to nearest is within 2^-8 relative (2^-24 in float32)
    assertClose(toFloat32(got.get(name)!), want, 2 ** -8, name);
    assertClose(toFloat32(gotF32.get(name)!), want, 2 ** -23, name);
    assert.ok(!bitsEqual(got.get(name)!, w), `${name} was not merged`);
  }
  assert.deepEqual(readModelConfig(merged).raw, { ...config.raw, torch_dtype: "bfloat16" });
  assert.ok(existsSync(join(merged, "tokenizer.json")));
  assert.ok(!existsSync(join(merged, ADAPTER_CONFIG_FILE)));
});

test("the merged model gives the LoRA model's logprobs on the native engine", { skip }, async () => {
  const merged = join(root, "merged-native");
  await exportOk("--checkpoint", adapterDir, "--out", merged, "--merge", "--dtype", "f32");
  const a = await LocalEngine.load(adapterDir, { workers: 0, backend: "native", bf16Products: "exact" });
  const b = await LocalEngine.load(merged, { workers: 0, backend: "native", bf16Products: "exact" });
  const plain = await LocalEngine.load(base, { workers: 0, backend: "native", bf16Products: "exact" });
  try {
    const rng = new Rng(5);
    const seqs = [7, 12].map((n) => Array.from({ length: n }, () => 3 + rng.int(config.vocabSize - 3)));
    const [want, got, without] = await Promise.all([a, b, plain].map((e) => e.computeLogprobs(seqs)));
    let moved = 0;
    got.forEach((row, i) =>
      row.forEach((x, j) => {
        if (x === null) return;
        assert.ok(Math.abs(x - want[i][j]!) < 1e-4, `sequence ${i} token ${j}: ${x} vs LoRA ${want[i][j]}`);
        moved = Math.max(moved, Math.abs(x - without[i][j]!));
      }),
    );
    assert.ok(moved > 0.05, `the adapters barely change the model (${moved})`);
  } finally {
    for (const e of [a, b, plain]) await e.dispose();
  }
});

/** The adapters read back from `dir` are `adapters`, bit for bit, for the same spec and base. */
function assertSameAdapters(dir: string): void {
  const back = readPeftAdapter(dir, config);
  assert.deepEqual(back.spec, spec);
  assert.equal(back.baseModel, base);
  assert.deepEqual([...back.adapters.keys()], [...adapters.keys()]);
  for (const [path, { a, b }] of adapters) {
    assert.deepEqual(back.adapters.get(path)!.a, a, path);
    assert.deepEqual(back.adapters.get(path)!.b, b, path);
  }
}

test("a LoRA directory exports in PEFT's layout, read back identically, base_model_name_or_path as it was", async () => {
  const out = join(root, "peft");
  const lines = await exportOk("--checkpoint", adapterDir, "--out", out);
  assert.match(lines[0], /LoRA adapters in PEFT's layout \(adapter_config\.json, adapter_model\.safetensors \(f32\)/);
  assert.ok(lines[1].includes(base), lines[1]);
  assert.equal(
    readFileSync(join(out, ADAPTER_CONFIG_FILE), "utf8"),
    readFileSync(join(adapterDir, ADAPTER_CONFIG_FILE), "utf8"),
  );
  assertSameAdapters(out);
  const files = readdirSync(out).sort();
  assert.ok(files.includes("tokenizer.json"), files.join(", "));
  for (const f of ["config.json", "model.safetensors", "optimizer.safetensors"]) assert.ok(!files.includes(f), f);
  // --dtype bf16 converts the adapter tensors
  const narrow = join(root, "peft-bf16");
  await exportOk("--checkpoint", adapterDir, "--out", narrow, "--dtype", "bf16");
  for (const [name, t] of tensorsOf(narrow, ADAPTER_WEIGHTS_FILE)) assert.equal(t.dtype, "BF16", name);
});

test("a LoRA checkpoint exports its adapters without optimizer state, and merges", async () => {
  const run = join(root, "run");
  const step = await writeCheckpoint(
    run,
    1,
    { step: 1 },
    async (tmp) => {
      // a LoRA checkpoint's policy, as saveLoraTrainable writes it
      const policy = join(tmp, "policy");
      writePeftAdapter(policy, spec, adapters, { baseModel: base, config });
      for (const f of ["config.json", ...TOKENIZER_FILES])
        if (existsSync(join(base, f))) copyFileSync(join(base, f), join(policy, f));
      writeSafetensorsFile(join(policy, "optimizer.safetensors"), { m: { shape: [1], data: new Float32Array(1) } });
      writeFileSync(join(policy, "trainable.json"), JSON.stringify({ step: 1 }) + "\n");
    },
    1,
  );
  const out = join(root, "from-checkpoint");
  await exportOk("--checkpoint", step, "--out", out);
  assertSameAdapters(out);
  assert.ok(!existsSync(join(out, "optimizer.safetensors")));
  const merged = join(root, "from-checkpoint-merged");
  await exportOk("--checkpoint", step, "--out", merged, "--merge");
  for (const [name, t] of tensorsOf(merged))
    assert.ok(bitsEqual(t, tensorsOf(join(root, "merged")).get(name)!), `${name} differs from the direct merge`);
});

test("--gguf adds model.gguf: full weights in their dtype or --dtype's, or the merged model", async () => {
  const out = join(root, "with-gguf");
  const lines = await exportOk("--checkpoint", base, "--out", out, "--gguf");
  assert.match(lines[1], /with-gguf\/model\.gguf: the same weights in llama\.cpp's GGUF format/);
  const bf16 = readFileSync(join(out, "model.gguf"));
  assert.equal(bf16.toString("latin1", 0, 4), "GGUF");
  const wide = join(root, "with-gguf-f32");
  await exportOk("--checkpoint", base, "--out", wide, "--gguf", "--dtype", "f32");
  const f32 = readFileSync(join(wide, "model.gguf"));
  // the matrices double in size; the metadata and the float32 vectors stay the same
  assert.ok(f32.length > 1.8 * bf16.length && f32.length < 2 * bf16.length, `${f32.length} vs ${bf16.length}`);
  const merged = join(root, "merged-gguf");
  const mergedLines = await exportOk("--checkpoint", adapterDir, "--out", merged, "--merge", "--gguf");
  assert.equal(mergedLines.length, 2);
  assert.equal(readFileSync(join(merged, "model.gguf")).length, bf16.length, "the same shapes and dtypes as the base");
  assert.ok(!existsSync(join(merged, "model.gguf.tmp")));
});

test("bad input: one line naming the file or field, exit 1, nothing written", async () => {
  // --merge on full weights
  let line = await exportFails(join(root, "bad-1"), "--checkpoint", base, "--merge");
  assert.match(line, /^error: export: --merge: .*base holds full weights, no LoRA adapters/);
  // the base the adapter config names does not exist (merged or not)
  const gone = join(root, "adapter-gone");
  writePeftAdapter(gone, spec, adapters, { baseModel: join(root, "no-such-base"), config });
  for (const merge of [[], ["--merge"]]) {
    line = await exportFails(join(root, "bad-2"), "--checkpoint", gone, ...merge);
    assert.ok(line.startsWith(`error: ${join(gone, ADAPTER_CONFIG_FILE)} (base_model_name_or_path): `), line);
    assert.match(line, /no-such-base is not a model directory here/);
  }
  // adapters for a wider model than the base
  const wide = join(root, "adapter-wide");
  const wideConfig = { ...config, hiddenSize: 2 * config.hiddenSize };
  writePeftAdapter(wide, spec, randomAdaptersFor(wideConfig, 1), { baseModel: base });
  line = await exportFails(join(root, "bad-3"), "--checkpoint", wide, "--merge");
  assert.ok(line.startsWith(`error: ${join(wide, ADAPTER_WEIGHTS_FILE)} (base_model.model.model.layers.0.`), line);
  assert.match(line, /disagrees with the base model/);
  // --gguf on adapters alone
  line = await exportFails(join(root, "bad-5"), "--checkpoint", adapterDir, "--gguf");
  assert.match(line, /^error: export: --gguf: .*holds LoRA adapters.*add --merge/);
  // a path that is none of the three
  line = await exportFails(join(root, "bad-4"), "--checkpoint", join(root));
  assert.match(line, /neither a checkpoint \(manifest\.json\), a model directory \(config\.json\) nor a LoRA/);
});
