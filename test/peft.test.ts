import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { parseModelConfig, presetConfigJson, type ModelConfig } from "../src/model/config.js";
import {
  LORA_TARGETS,
  describeTargets,
  initAdapters,
  loraModules,
  loraScale,
  mergeAdapters,
  readPeftAdapter,
  targetsFromTinker,
  tinkerFromTargets,
  writePeftAdapter,
  type LoraAdapters,
  type LoraSpec,
} from "../src/model/peft.js";
import {
  type HostTensor,
  fromFloat32,
  readSafetensorsFile,
  toFloat32,
  writeSafetensorsFile,
} from "../src/model/safetensors.js";
import { InputError, ModelFormatError } from "../src/util/errors.js";
import { Rng } from "../src/util/rng.js";

const tmp = () => fs.mkdtempSync(path.join(os.tmpdir(), "agent-r1-peft-"));
/** The tiny preset (hidden 64, 2 layers, 4 heads of 16, 2 KV heads, FFN 192), vocabulary 50. */
const modelConfig = (tied: boolean): ModelConfig =>
  parseModelConfig(presetConfigJson("tiny", 50, { tie_word_embeddings: tied }), "config.json");
const untied = modelConfig(false),
  tied = modelConfig(true);
const ALL = [...LORA_TARGETS];
const spec = (o: Partial<LoraSpec> = {}): LoraSpec => ({
  rank: 4,
  alpha: 8,
  dropout: 0.05,
  targets: ALL,
  rslora: false,
  ...o,
});
const bitsOf = (a: Float32Array) => [...new Uint32Array(a.buffer, a.byteOffset, a.length)];

/** Adapters with non-zero A and B (B is zero after init, which would hide a swapped A and B). */
function randomAdapters(config: ModelConfig, s: LoraSpec, seed = 1): LoraAdapters {
  const adapters = initAdapters(config, s, seed);
  const rng = new Rng(seed, 999);
  for (const { b } of adapters.values()) for (let i = 0; i < b.length; i++) b[i] = rng.normal() * 0.01;
  return adapters;
}

/** A good adapter directory to break in one place. */
function goodAdapter(s = spec(), config = untied): string {
  const dir = path.join(tmp(), "adapter");
  writePeftAdapter(dir, s, randomAdapters(config, s), { baseModel: "Qwen/Tiny", config });
  return dir;
}
const cfgPath = (dir: string) => path.join(dir, "adapter_config.json");
const wPath = (dir: string) => path.join(dir, "adapter_model.safetensors");
function editConfig(dir: string, edit: (c: Record<string, unknown>) => void): void {
  const c = JSON.parse(fs.readFileSync(cfgPath(dir), "utf8"));
  edit(c);
  fs.writeFileSync(cfgPath(dir), JSON.stringify(c));
}

function assertPeftError(fn: () => unknown, file: string, field: string | undefined, re: RegExp): ModelFormatError {
  let err: unknown;
  try {
    fn();
  } catch (e) {
    err = e;
  }
  assert.ok(err instanceof ModelFormatError, `expected a ModelFormatError, got ${String(err)}`);
  assert.equal(err.file, file, err.message);
  assert.equal(err.field, field, err.message);
  assert.ok(err.message.startsWith(file), err.message);
  if (field) assert.ok(err.message.includes(`(${field})`), err.message);
  assert.ok(!err.message.includes("\n") && !(err.hint ?? "").includes("\n"), "one line");
  assert.match(err.message, re);
  return err;
}

test("scale, Tinker's switches and the modules they adapt", () => {
  assert.equal(loraScale({ rank: 16, alpha: 32, rslora: false }), 2);
  assert.equal(loraScale({ rank: 16, alpha: 32, rslora: true }), 8);
  assert.deepEqual(targetsFromTinker({ trainAttn: true, trainMlp: false, trainUnembed: false }), [
    "q_proj",
    "k_proj",
    "v_proj",
    "o_proj",
  ]);
  assert.deepEqual(targetsFromTinker({ trainAttn: false, trainMlp: true, trainUnembed: true }), [
    "gate_proj",
    "up_proj",
    "down_proj",
    "lm_head",
  ]);
  assert.deepEqual(targetsFromTinker({ trainAttn: true, trainMlp: true, trainUnembed: true }), ALL);
  for (const flags of [
    { trainAttn: true, trainMlp: true, trainUnembed: true },
    { trainAttn: false, trainMlp: true, trainUnembed: false },
    { trainAttn: true, trainMlp: false, trainUnembed: true },
  ])
    assert.deepEqual(tinkerFromTargets(targetsFromTinker(flags)), flags);
  assert.equal(tinkerFromTargets(["q_proj", "v_proj"]), undefined, "part of a group is not expressible");
  assert.equal(
    describeTargets(["lm_head", "q_proj", "k_proj", "v_proj", "o_proj"]),
    "attention (q_proj, k_proj, v_proj, o_proj) + unembedding (lm_head)",
  );
  // Shapes: (out, in) of each linear, layer by layer, then the head.
  const mods = loraModules(untied, ALL);
  assert.equal(mods.length, 2 * 7 + 1);
  assert.deepEqual(
    mods.slice(0, 7).map((m) => [m.path, m.out, m.in]),
    [
      ["model.layers.0.self_attn.q_proj", 64, 64],
      ["model.layers.0.self_attn.k_proj", 32, 64],
      ["model.layers.0.self_attn.v_proj", 32, 64],
      ["model.layers.0.self_attn.o_proj", 64, 64],
      ["model.layers.0.mlp.gate_proj", 192, 64],
      ["model.layers.0.mlp.up_proj", 192, 64],
      ["model.layers.0.mlp.down_proj", 64, 192],
    ],
  );
  assert.deepEqual(mods.at(-1), { path: "lm_head", target: "lm_head", out: 50, in: 64 });
});

test("the module shapes agree with the transformer's parameterShapes", async () => {
  const { parameterShapes } = await import("../src/model/parameter-shapes.js");
  const config = parseModelConfig({
    ...presetConfigJson("tiny", 70, { tie_word_embeddings: false }),
    model_type: "llama",
    head_dim: 24,
    num_attention_heads: 4,
    num_key_value_heads: 1,
  });
  const shapes = parameterShapes(config);
  for (const m of loraModules(config, ALL)) assert.deepEqual(shapes.get(`${m.path}.weight`), [m.out, m.in], m.path);
});

test("write -> read round trip: identical spec, adapters and base model; the files are PEFT's", () => {
  const s = spec({ rslora: true, alpha: 16, dropout: 0.1 });
  const adapters = randomAdapters(untied, s, 7);
  const dir = path.join(tmp(), "out");
  writePeftAdapter(dir, s, adapters, { baseModel: "Qwen/Qwen2.5-0.5B", config: untied });
  assert.deepEqual(fs.readdirSync(dir).sort(), ["adapter_config.json", "adapter_model.safetensors"]);
  assert.deepEqual(fs.readdirSync(path.dirname(dir)), ["out"], "no temporary directory left");
  const cfg = JSON.parse(fs.readFileSync(cfgPath(dir), "utf8"));
  assert.deepEqual(cfg, {
    alpha_pattern: {},
    base_model_name_or_path: "Qwen/Qwen2.5-0.5B",
    bias: "none",
    fan_in_fan_out: false,
    inference_mode: true,
    init_lora_weights: true,
    layers_pattern: null,
    layers_to_transform: null,
    lora_alpha: 16,
    lora_dropout: 0.1,
    modules_to_save: null,
    peft_type: "LORA",
    r: 4,
    rank_pattern: {},
    revision: null,
    target_modules: ["down_proj", "gate_proj", "k_proj", "lm_head", "o_proj", "q_proj", "up_proj", "v_proj"],
    task_type: "CAUSAL_LM",
    use_dora: false,
    use_rslora: true,
  });
  const file = readSafetensorsFile(wPath(dir));
  assert.deepEqual(file.metadata, { format: "pt" });
  assert.deepEqual(file.tensors.get("base_model.model.model.layers.1.self_attn.k_proj.lora_A.weight")?.shape, [4, 64]);
  assert.deepEqual(file.tensors.get("base_model.model.model.layers.1.self_attn.k_proj.lora_B.weight")?.shape, [32, 4]);
  assert.deepEqual(file.tensors.get("base_model.model.model.layers.0.mlp.down_proj.lora_A.weight")?.shape, [4, 192]);
  assert.deepEqual(file.tensors.get("base_model.model.lm_head.lora_B.weight")?.shape, [50, 4]);
  assert.equal(file.tensors.size, 2 * 15);
  for (const t of file.tensors.values()) assert.equal(t.dtype, "F32");

  const back = readPeftAdapter(dir, untied);
  assert.deepEqual(back.spec, s);
  assert.equal(back.baseModel, "Qwen/Qwen2.5-0.5B");
  assert.deepEqual([...back.adapters.keys()], [...adapters.keys()]);
  for (const [k, { a, b }] of adapters) {
    assert.deepEqual(bitsOf(back.adapters.get(k)!.a), bitsOf(a), k);
    assert.deepEqual(bitsOf(back.adapters.get(k)!.b), bitsOf(b), k);
  }
  // Written again over the same directory: replaced whole, and the same bytes.
  const before = fs.readFileSync(wPath(dir));
  writePeftAdapter(dir, back.spec, back.adapters, { baseModel: back.baseModel });
  assert.deepEqual(fs.readFileSync(wPath(dir)), before);

  // No base model: null in the file, absent when read.
  const q = spec({ targets: ["q_proj", "v_proj"] });
  const dir2 = path.join(tmp(), "qv");
  writePeftAdapter(dir2, q, randomAdapters(untied, q));
  assert.equal(JSON.parse(fs.readFileSync(cfgPath(dir2), "utf8")).base_model_name_or_path, null);
  const back2 = readPeftAdapter(dir2, untied);
  assert.equal("baseModel" in back2, false);
  assert.deepEqual(back2.spec.targets, ["q_proj", "v_proj"]);
});

test("16-bit adapter files are read as float32", () => {
  const s = spec({ targets: ["q_proj", "down_proj"] });
  const adapters = randomAdapters(untied, s, 3);
  for (const dtype of ["BF16", "F16"] as const) {
    const dir = path.join(tmp(), dtype);
    writePeftAdapter(dir, s, adapters, { dtype });
    assert.equal(readSafetensorsFile(wPath(dir)).tensors.values().next().value!.dtype, dtype);
    const back = readPeftAdapter(dir, untied);
    for (const [k, { a, b }] of adapters) {
      const round = (x: Float32Array) => toFloat32({ dtype, shape: [x.length], data: fromFloat32(x, dtype) });
      assert.ok(back.adapters.get(k)!.a instanceof Float32Array);
      assert.deepEqual(back.adapters.get(k)!.a, round(a), k);
      assert.deepEqual(back.adapters.get(k)!.b, round(b), k);
    }
  }
});

test("unsupported options are refused in one line naming adapter_config.json and the option", () => {
  const dir = goodAdapter();
  const file = cfgPath(dir);
  const good = fs.readFileSync(file, "utf8");
  const refuse = (key: string, value: unknown, re: RegExp) => {
    fs.writeFileSync(file, good);
    editConfig(dir, (c) => (c[key] = value));
    assertPeftError(() => readPeftAdapter(dir, untied), file, key, re);
  };
  refuse("peft_type", "PREFIX_TUNING", /"PREFIX_TUNING" is not supported; only LORA/);
  refuse("task_type", "SEQ_CLS", /only CAUSAL_LM/);
  refuse("use_dora", true, /DoRA is not supported; only plain LoRA \(use_dora: false\)/);
  refuse("fan_in_fan_out", true, /fan_in_fan_out: false/);
  refuse("bias", "all", /"all" trains biases, which is not supported; only "none"/);
  refuse("bias", "lora_only", /only "none"/);
  refuse("modules_to_save", ["embed_tokens", "lm_head"], /modules_to_save: null/);
  refuse("layers_to_transform", [0], /every layer/);
  refuse("layers_to_transform", 1, /every layer/);
  refuse("layers_pattern", "layers", /every layer/);
  refuse("rank_pattern", { "model.layers.0.self_attn.q_proj": 8 }, /one r for every module/);
  refuse("alpha_pattern", { q_proj: 32 }, /one lora_alpha/);
  refuse(
    "target_modules",
    ["q_proj", "embed_tokens"],
    /"embed_tokens" is not a module we support; supported: q_proj, k_proj/,
  );
  refuse("target_modules", ["self_attn.q_proj"], /not a module we support/);
  refuse("target_modules", [], /is empty/);
  refuse("target_parameters", ["mlp.experts.gate_up_proj"], /target_parameters: null/);
  refuse("trainable_token_indices", [5, 7], /trainable_token_indices: null/);
  refuse(
    "layer_replication",
    [
      [0, 2],
      [1, 2],
    ],
    /layer replication/,
  );
  refuse("megatron_config", { tensor_model_parallel_size: 2 }, /Megatron/);
  refuse("loftq_config", { loftq_bits: 4, loftq_iter: 1 }, /LoftQ/);
  refuse("lora_bias", true, /lora_bias: false/);
  refuse("use_qalora", true, /QALoRA/);
  refuse("alora_invocation_tokens", [1, 2], /activated LoRA/);
  // Types and ranges, from the schema.
  refuse("r", "8", /number/);
  refuse("r", 0, /./);
  refuse("lora_alpha", -1, /./);
  refuse("lora_dropout", 1.5, /./);
  refuse("use_rslora", "yes", /boolean/);
  refuse("peft_type", undefined, /./);

  // Defaults and unknown keys are fine; the adapter loads.
  fs.writeFileSync(file, good);
  editConfig(dir, (c) => {
    Object.assign(c, {
      modules_to_save: [],
      rank_pattern: {},
      alpha_pattern: {},
      loftq_config: {},
      megatron_config: null,
      layer_replication: null,
      target_parameters: null,
      trainable_token_indices: null,
      exclude_modules: null,
      lora_bias: false,
      use_qalora: false,
      eva_config: null,
      corda_config: null,
      init_lora_weights: "gaussian",
      auto_mapping: null,
      a_key_from_2030: { anything: [1, 2] },
    });
  });
  assert.deepEqual(readPeftAdapter(dir, untied).spec, spec());
  // task_type null (a bare PeftModel) has the same tensor names.
  editConfig(dir, (c) => (c.task_type = null));
  assert.deepEqual(readPeftAdapter(dir, untied).spec, spec());
});

test("files: missing, unreadable or in the old pickle format", () => {
  const empty = tmp();
  assertPeftError(() => readPeftAdapter(empty, untied), cfgPath(empty), undefined, /file not found/);
  assertPeftError(
    () => readPeftAdapter(path.join(empty, "nope"), untied),
    cfgPath(path.join(empty, "nope")),
    undefined,
    /not found/,
  );
  fs.writeFileSync(cfgPath(empty), "{ not json");
  assertPeftError(() => readPeftAdapter(empty, untied), cfgPath(empty), undefined, /not valid JSON/);
  fs.writeFileSync(cfgPath(empty), "[1]");
  assertPeftError(() => readPeftAdapter(empty, untied), cfgPath(empty), undefined, /JSON object/);
  const dir = goodAdapter();
  fs.rmSync(wPath(dir));
  assertPeftError(() => readPeftAdapter(dir, untied), wPath(dir), undefined, /file not found/);
  fs.writeFileSync(path.join(dir, "adapter_model.bin"), "pickle");
  const e = assertPeftError(() => readPeftAdapter(dir, untied), wPath(dir), undefined, /adapter_model\.bin/);
  assert.match(e.hint ?? "", /safe_serialization/);
  fs.writeFileSync(wPath(dir), new Uint8Array([1, 2, 3]));
  assertPeftError(() => readPeftAdapter(dir, untied), wPath(dir), undefined, /truncated/);
});

test("tensors: wrong shape, missing lora_A / lora_B, names that are not LoRA tensors of a targeted module", () => {
  const s = spec({ targets: ["q_proj", "v_proj"] });
  const dir = goodAdapter(s);
  const file = wPath(dir);
  const good = readSafetensorsFile(file).tensors;
  const rewrite = (edit: (t: Map<string, HostTensor>) => void) => {
    const t = new Map<string, HostTensor>(good);
    edit(t);
    writeSafetensorsFile(file, t, { metadata: { format: "pt" } });
  };
  const A0 = "base_model.model.model.layers.0.self_attn.v_proj.lora_A.weight";
  const B1 = "base_model.model.model.layers.1.self_attn.q_proj.lora_B.weight";

  rewrite((t) => t.set(A0, { shape: [4, 32], data: new Float32Array(128) }));
  assertPeftError(
    () => readPeftAdapter(dir, untied),
    file,
    A0,
    /shape \[4, 32\] disagrees with the base model: r = 4 and config\.json imply \[4, 64\] \(lora_A is \(r, in_features\)\)/,
  );
  rewrite((t) => t.set(B1, { shape: [64, 8], data: new Float32Array(512) }));
  assertPeftError(
    () => readPeftAdapter(dir, untied),
    file,
    B1,
    /shape \[64, 8\] .* imply \[64, 4\] \(lora_B is \(out_features, r\)\)/,
  );
  rewrite((t) => t.set(B1, { shape: [256], data: new Float32Array(256) }));
  assertPeftError(() => readPeftAdapter(dir, untied), file, B1, /shape \[256\] .* \[64, 4\]/);
  // The base model disagrees (another hidden size): same check from the other side.
  rewrite(() => {});
  const wide = parseModelConfig(presetConfigJson("tiny", 50, { tie_word_embeddings: false, hidden_size: 128 }));
  assertPeftError(
    () => readPeftAdapter(dir, wide),
    file,
    "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight",
    /imply \[4, 128\]/,
  );

  rewrite((t) => t.delete(B1));
  assertPeftError(
    () => readPeftAdapter(dir, untied),
    file,
    B1,
    /missing: model\.layers\.1\.self_attn\.q_proj is targeted \(q_proj\) but has no lora_B/,
  );
  rewrite((t) => t.delete(A0));
  assertPeftError(() => readPeftAdapter(dir, untied), file, A0, /missing/);

  const kA = "base_model.model.model.layers.0.self_attn.k_proj.lora_A.weight";
  rewrite((t) => t.set(kA, { shape: [4, 64], data: new Float32Array(256) }));
  assertPeftError(
    () => readPeftAdapter(dir, untied),
    file,
    kA,
    /not a LoRA tensor of a targeted module \(targets: q_proj, v_proj/,
  );
  for (const name of [
    "base_model.model.model.layers.0.self_attn.q_proj.lora_magnitude_vector",
    "base_model.model.model.embed_tokens.base_layer.weight",
    "model.layers.0.self_attn.q_proj.lora_A.weight",
    "base_model.model.model.layers.0.self_attn.q_proj.lora_A.default.weight",
    "base_model.model.model.layers.2.self_attn.q_proj.lora_A.weight",
  ]) {
    rewrite((t) => t.set(name, { shape: [1], data: new Float32Array(1) }));
    assertPeftError(() => readPeftAdapter(dir, untied), file, name, /not a LoRA tensor of a targeted module/);
  }
});

test("target_modules as a regex, all-linear, the default and exclude_modules, resolved against the model's modules", () => {
  const goodDir = goodAdapter(); // every target, untied: the tensors to pick from
  const dir = goodAdapter();
  const file = cfgPath(dir);
  const good = fs.readFileSync(file, "utf8");
  /** Sets target_modules (and exclude_modules); rewrites the tensors for the targets it should resolve to. */
  const targetsOf = (tm: unknown, ex: unknown = null, config = untied) => {
    fs.writeFileSync(file, good);
    editConfig(dir, (c) => {
      c.target_modules = tm;
      c.exclude_modules = ex;
    });
    return readPeftAdapter(dir, config);
  };
  const expectTargets = (tm: unknown, ex: unknown, want: string[]) => {
    // The file holds every target; keep only the tensors of `want` so the read succeeds.
    const all = readSafetensorsFile(wPath(goodDir)).tensors;
    const keep = new Map([...all].filter(([n]) => want.some((t) => n.includes(`.${t}.`))));
    writeSafetensorsFile(wPath(dir), keep);
    const { spec: s, adapters } = targetsOf(tm, ex);
    assert.deepEqual(s.targets, want, JSON.stringify(tm));
    assert.equal(
      adapters.size,
      want.reduce((n, t) => n + (t === "lm_head" ? 1 : 2), 0),
    );
  };
  expectTargets(".*\\.(q_proj|v_proj)", null, ["q_proj", "v_proj"]);
  expectTargets("model\\.layers\\.\\d+\\.self_attn\\.[qkvo]_proj", null, ["q_proj", "k_proj", "v_proj", "o_proj"]);
  expectTargets(".*mlp\\.(gate|up|down)_proj", null, ["gate_proj", "up_proj", "down_proj"]);
  expectTargets("(?P<layer>model\\.layers\\.\\d+)\\.self_attn\\.q_proj", null, ["q_proj"]);
  expectTargets(".*_proj|lm_head", null, ALL);
  expectTargets("lm_head", null, ["lm_head"]);
  expectTargets(
    "all-linear",
    null,
    ALL.filter((t) => t !== "lm_head"),
  );
  expectTargets(null, null, ["q_proj", "v_proj"]); // PEFT's default for llama / qwen2
  expectTargets(["q_proj", "k_proj", "v_proj"], ["k_proj"], ["q_proj", "v_proj"]);
  expectTargets(".*_proj", ".*mlp\\..*", ["q_proj", "k_proj", "v_proj", "o_proj"]);

  const refuse = (tm: unknown, ex: unknown, field: string, re: RegExp, config = untied) =>
    assertPeftError(() => targetsOf(tm, ex, config), file, field, re);
  refuse(".*", null, "target_modules", /matches model, which is not a module we support; supported: q_proj/);
  refuse(".*mlp", null, "target_modules", /matches model\.layers\.0\.mlp, which is not a module we support/);
  refuse(".*embed_tokens", null, "target_modules", /model\.embed_tokens/);
  refuse(
    "model\\.layers\\.0\\.self_attn\\.q_proj",
    null,
    "target_modules",
    /adapts q_proj in layer 0 of 2; we support a target on every layer only/,
  );
  refuse("q_proj", null, "target_modules", /matches no module of this model/);
  refuse("(", null, "target_modules", /not a regular expression we can read/);
  refuse(["q_proj"], ["model.layers.1.self_attn.q_proj"], "exclude_modules", /adapts q_proj in layer 0 of 2/);
  refuse(["q_proj"], ["q_proj"], "exclude_modules", /leaves no module to adapt/);
  refuse(["q_proj"], "[", "exclude_modules", /not a regular expression/);
});

test("a tied-embedding model with lm_head targeted is refused: the head is the embedding", () => {
  const dir = goodAdapter(spec({ targets: ["q_proj", "lm_head"] }));
  const why =
    /lm_head is targeted but this model ties the head to the input embedding \(tie_word_embeddings in config\.json\): the head is model\.embed_tokens/;
  assertPeftError(() => readPeftAdapter(dir, tied), cfgPath(dir), "target_modules", why);
  editConfig(dir, (c) => (c.target_modules = ".*\\.q_proj|lm_head"));
  assertPeftError(() => readPeftAdapter(dir, tied), cfgPath(dir), "target_modules", why);
  assert.deepEqual(readPeftAdapter(dir, untied).spec.targets, ["q_proj", "lm_head"]);
  assert.throws(
    () => initAdapters(tied, spec({ targets: ["lm_head"] }), 1),
    (e: unknown) => e instanceof InputError && why.test(e.message),
  );
  assert.throws(
    () => loraModules(tied, targetsFromTinker({ trainAttn: true, trainMlp: true, trainUnembed: true })),
    InputError,
  );
  assert.throws(
    () => writePeftAdapter(path.join(tmp(), "x"), spec({ targets: ["lm_head"] }), new Map(), { config: tied }),
    InputError,
  );
  // Without lm_head a tied model is fine.
  assert.equal(initAdapters(tied, spec({ targets: ["q_proj"] }), 1).size, 2);
});

test("merge: W + scale * B @ A against a hand-computed example, input untouched", () => {
  // W (out 2, in 3); r = 1; A = [1, 0, -1]; B = [2, 0.5]; alpha 2 -> scale 2.
  // B @ A = [[2, 0, -2], [0.5, 0, -0.5]]; times 2 = [[4, 0, -4], [1, 0, -1]].
  const w: HostTensor = { shape: [2, 3], data: Float32Array.of(1, 2, 3, 4, 5, 6) };
  const norm: HostTensor = { shape: [3], data: Float32Array.of(1, 1, 1) };
  const weights = new Map([
    ["model.layers.0.self_attn.q_proj.weight", w],
    ["model.norm.weight", norm],
  ]);
  const adapters: LoraAdapters = new Map([
    ["model.layers.0.self_attn.q_proj", { a: Float32Array.of(1, 0, -1), b: Float32Array.of(2, 0.5) }],
  ]);
  const merged = mergeAdapters(weights, spec({ rank: 1, alpha: 2, targets: ["q_proj"] }), adapters);
  assert.notEqual(merged, weights);
  assert.deepEqual([...merged.get("model.layers.0.self_attn.q_proj.weight")!.data], [5, 2, -1, 5, 5, 5]);
  assert.deepEqual(merged.get("model.layers.0.self_attn.q_proj.weight")!.shape, [2, 3]);
  assert.equal(merged.get("model.norm.weight"), norm, "tensors without an adapter are shared");
  assert.deepEqual([...w.data], [1, 2, 3, 4, 5, 6], "input not modified");
  assert.equal(weights.get("model.layers.0.self_attn.q_proj.weight"), w);

  // r = 2 with rsLoRA: scale = alpha / sqrt(2) = 2 for alpha = 2 * sqrt(2).
  // A = [[1, 1, 0], [0, 1, 1]]; B = [[1, 0], [0, -1]] -> B @ A = [[1, 1, 0], [0, -1, -1]]; times 2.
  const two = mergeAdapters(
    weights,
    spec({ rank: 2, alpha: 2 * Math.SQRT2, rslora: true, targets: ["q_proj"] }),
    new Map([
      ["model.layers.0.self_attn.q_proj", { a: Float32Array.of(1, 1, 0, 0, 1, 1), b: Float32Array.of(1, 0, 0, -1) }],
    ]),
  );
  const got = [...two.get("model.layers.0.self_attn.q_proj.weight")!.data];
  [3, 4, 3, 4, 3, 4].forEach((v, i) => assert.ok(Math.abs(got[i] - v) < 1e-6, `${got}`));

  // Mismatched sizes and absent weights are refused.
  assert.throws(
    () => mergeAdapters(weights, spec({ rank: 2, targets: ["q_proj"] }), adapters),
    (e: unknown) => e instanceof InputError && /need 6 and 4/.test(e.message),
  );
  assert.throws(
    () =>
      mergeAdapters(
        weights,
        spec({ rank: 1 }),
        new Map([["lm_head", { a: new Float32Array(3), b: new Float32Array(2) }]]),
      ),
    (e: unknown) => e instanceof InputError && /tied embeddings/.test(e.message),
  );
  // Freshly initialized adapters (B = 0) change nothing.
  const base = new Map<string, HostTensor>(
    loraModules(untied, ALL).map((m) => [
      `${m.path}.weight`,
      { shape: [m.out, m.in], data: Float32Array.from({ length: m.out * m.in }, (_, i) => Math.sin(i)) },
    ]),
  );
  const same = mergeAdapters(base, spec(), initAdapters(untied, spec(), 5));
  for (const [k, t] of base) assert.deepEqual(bitsOf(same.get(k)!.data), bitsOf(t.data), k);
});

test("init: B all zero, A uniform within 1/sqrt(in), reproducible per seed", () => {
  const s = spec({ rank: 8 });
  const adapters = initAdapters(untied, s, 42);
  const mods = loraModules(untied, ALL);
  assert.deepEqual(
    [...adapters.keys()],
    mods.map((m) => m.path),
  );
  let all: number[] = [];
  for (const m of mods) {
    const { a, b } = adapters.get(m.path)!;
    assert.equal(a.length, 8 * m.in);
    assert.equal(b.length, m.out * 8);
    assert.ok(
      b.every((x) => x === 0),
      `${m.path}: B is zero`,
    );
    const bound = 1 / Math.sqrt(m.in);
    assert.ok(
      a.every((x) => Math.abs(x) <= bound),
      `${m.path}: A within ±${bound}`,
    );
    // Uses the range: the extremes come close to the bound.
    assert.ok(Math.max(...a) > 0.95 * bound && Math.min(...a) < -0.95 * bound, m.path);
    all = all.concat([...a].map((x) => x / bound));
  }
  // Scaled to [-1, 1): mean 0, variance 1/3.
  const mean = all.reduce((x, y) => x + y, 0) / all.length;
  const variance = all.reduce((x, y) => x + (y - mean) ** 2, 0) / all.length;
  assert.ok(Math.abs(mean) < 0.01, `mean ${mean}`);
  assert.ok(Math.abs(variance - 1 / 3) < 0.01, `variance ${variance}`);
  // Same seed, same adapters; another seed, others; modules differ from each other.
  const again = initAdapters(untied, s, 42);
  for (const [k, { a }] of adapters) assert.deepEqual(bitsOf(again.get(k)!.a), bitsOf(a));
  const other = initAdapters(untied, s, 43);
  assert.notDeepEqual(bitsOf(other.get("lm_head")!.a), bitsOf(adapters.get("lm_head")!.a));
  const q0 = adapters.get("model.layers.0.self_attn.q_proj")!.a,
    q1 = adapters.get("model.layers.1.self_attn.q_proj")!.a;
  assert.notDeepEqual(bitsOf(q0), bitsOf(q1));
});

test("writing refuses a spec or adapters PEFT could not load back", () => {
  const dir = path.join(tmp(), "bad");
  const cfg = path.join(dir, "adapter_config.json"),
    w = path.join(dir, "adapter_model.safetensors");
  const s = spec({ targets: ["q_proj"] });
  const good = initAdapters(untied, s, 1);
  assertPeftError(() => writePeftAdapter(dir, spec({ rank: 0 }), good), cfg, "r", /positive integer/);
  assertPeftError(() => writePeftAdapter(dir, spec({ dropout: 1 }), good), cfg, "lora_dropout", /\[0, 1\)/);
  assertPeftError(
    () => writePeftAdapter(dir, spec({ targets: ["qkv" as never] }), good),
    cfg,
    "target_modules",
    /not a module we support/,
  );
  assertPeftError(
    () =>
      writePeftAdapter(
        dir,
        s,
        new Map([["model.layers.0.attn.q", { a: new Float32Array(4), b: new Float32Array(4) }]]),
      ),
    w,
    "model.layers.0.attn.q",
    /not a module path/,
  );
  assertPeftError(
    () =>
      writePeftAdapter(
        dir,
        s,
        new Map([["model.layers.0.mlp.up_proj", { a: new Float32Array(4), b: new Float32Array(4) }]]),
      ),
    w,
    "model.layers.0.mlp.up_proj",
    /up_proj is not among the spec's targets/,
  );
  assertPeftError(
    () =>
      writePeftAdapter(
        dir,
        s,
        new Map([["model.layers.0.self_attn.q_proj", { a: new Float32Array(6), b: new Float32Array(8) }]]),
      ),
    w,
    "model.layers.0.self_attn.q_proj",
    /with r = 4 they must be/,
  );
  const one = new Map([...good].slice(0, 1));
  assertPeftError(
    () => writePeftAdapter(dir, s, one, { config: untied }),
    w,
    "model.layers.1.self_attn.q_proj",
    /no adapter given/,
  );
  const wrong = new Map(good);
  wrong.set("model.layers.0.self_attn.q_proj", { a: new Float32Array(4 * 32), b: new Float32Array(64 * 4) });
  assertPeftError(
    () => writePeftAdapter(dir, s, wrong, { config: untied }),
    w,
    "model.layers.0.self_attn.q_proj",
    /the model needs \[4, 64\]/,
  );
  assert.ok(!fs.existsSync(dir), "nothing written");
});
