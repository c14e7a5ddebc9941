/**
 * LoRA adapters in Hugging Face PEFT's on-disk format, for the Qwen2 / Qwen3 / Llama decoder.
 *
 * A PEFT adapter is a directory with adapter_config.json and adapter_model.safetensors. For a
 * CausalLM the tensors are named after the base model's module paths under "base_model.model.":
 *   base_model.model.model.layers.{i}.self_attn.{q,k,v,o}_proj.lora_A.weight   (r, in)
 *   base_model.model.model.layers.{i}.mlp.{gate,up,down}_proj.lora_B.weight    (out, r)
 *   base_model.model.lm_head.lora_{A,B}.weight
 * and a targeted linear W (out, in) computes x W^T + scale · (x A^T) B^T with scale = alpha / r,
 * or alpha / sqrt(r) with rsLoRA (use_rslora).
 *
 * We support plain LoRA on every layer alike: one rank and alpha, no bias, no DoRA, no extra
 * trained modules. Anything else in a config is refused with a one-line ModelFormatError naming
 * adapter_config.json and the option, rather than loaded into something that computes another
 * function than PEFT would (./peft-config.ts). Adapters are float32 in memory (they train in float32); F16 / BF16
 * files are widened on reading.
 */
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { ModelConfig } from "./config.js";
import { readSafetensorsFile, writeSafetensorsFile, type DType, type HostTensor } from "./safetensors.js";
import { checkFiniteTensor, describeNonFinite, firstNonFinite } from "./finite-weights.js";
import { writeDirectory } from "../util/atomic-write.js";
import { InputError, ModelFormatError } from "../util/errors.js";
import { Rng } from "../util/rng.js";
import { checkLoraScale, parsePeftConfig, show } from "./peft-config.js";
import {
  ADAPTER_CONFIG_FILE,
  ADAPTER_WEIGHTS_FILE,
  PREFIX,
  SUPPORTED,
  canonical,
  isTarget,
  loraModules,
  type LoraAdapters,
  type LoraSpec,
  type LoraTarget,
} from "./peft-targets.js";

export {
  ADAPTER_CONFIG_FILE,
  ADAPTER_WEIGHTS_FILE,
  LORA_TARGETS,
  describeTargets,
  loraModules,
  loraScale,
  targetsFromTinker,
  tinkerFromTargets,
  type LoraAdapter,
  type LoraAdapters,
  type LoraModule,
  type LoraSpec,
  type LoraTarget,
} from "./peft-targets.js";

// ---------------------------------------------------------------------------------------------
// Reading and writing

const tensorName = (path: string, which: "A" | "B") => `${PREFIX}${path}.lora_${which}.weight`;
const fmtShape = (s: readonly number[]) => `[${s.join(", ")}]`;

/** The LoRA spec of a PEFT adapter directory (its adapter_config.json only, checked against `config`). */
export function readPeftSpec(dir: string, config: ModelConfig): LoraSpec {
  return parsePeftConfig(dir, config).spec;
}

/**
 * Reads a PEFT LoRA adapter directory for a base model with `config`, checking every option,
 * name and shape. Tensors come back float32, keyed by base parameter name without ".weight",
 * layer by layer as loraModules lists them.
 */
export function readPeftAdapter(
  dir: string,
  config: ModelConfig,
): { spec: LoraSpec; adapters: LoraAdapters; baseModel?: string } {
  const { spec, baseModel } = parsePeftConfig(dir, config);
  const file = join(dir, ADAPTER_WEIGHTS_FILE);
  if (!existsSync(file) && existsSync(join(dir, "adapter_model.bin")))
    throw new ModelFormatError(
      file,
      undefined,
      "file not found; this adapter is saved as adapter_model.bin (a PyTorch pickle), which we do not read",
      "save it again with save_pretrained(..., safe_serialization=True)",
    );
  const { tensors } = readSafetensorsFile(file);
  const r = spec.rank;
  const expected = new Map<string, number[]>();
  const modules = loraModules(config, spec.targets);
  for (const m of modules) {
    expected.set(tensorName(m.path, "A"), [r, m.in]);
    expected.set(tensorName(m.path, "B"), [m.out, r]);
  }
  for (const [name, t] of tensors) {
    const want = expected.get(name);
    if (!want)
      throw new ModelFormatError(
        file,
        name,
        `not a LoRA tensor of a targeted module (targets: ${spec.targets.join(", ")}; names are like ${tensorName(modules[0].path, "A")})`,
      );
    if (t.shape.length !== want.length || t.shape.some((d, i) => d !== want[i])) {
      const which = name.endsWith(".lora_A.weight") ? "lora_A is (r, in_features)" : "lora_B is (out_features, r)";
      throw new ModelFormatError(
        file,
        name,
        `shape ${fmtShape(t.shape)} disagrees with the base model: r = ${r} and config.json imply ${fmtShape(want)} (${which})`,
      );
    }
    checkFiniteTensor(file, name, t);
  }
  const adapters: LoraAdapters = new Map();
  for (const m of modules) {
    const [a, b] = (["A", "B"] as const).map((w) => {
      const name = tensorName(m.path, w),
        t = tensors.get(name);
      if (!t)
        throw new ModelFormatError(file, name, `missing: ${m.path} is targeted (${m.target}) but has no lora_${w}`);
      return t.data;
    });
    adapters.set(m.path, { a, b });
  }
  return baseModel === undefined ? { spec, adapters } : { spec, adapters, baseModel };
}

const PATH_RE = /^(?:model\.layers\.(\d+)\.(?:self_attn\.([qkvo]_proj)|mlp\.(gate_proj|up_proj|down_proj))|(lm_head))$/;

function checkSpec(spec: LoraSpec, file: string): void {
  const fail = (field: string, msg: string): never => {
    throw new ModelFormatError(file, field, msg);
  };
  if (!Number.isInteger(spec.rank) || spec.rank <= 0) fail("r", `${show(spec.rank)} must be a positive integer`);
  if (!Number.isFinite(spec.alpha) || spec.alpha <= 0)
    fail("lora_alpha", `${show(spec.alpha)} must be a positive number`);
  checkLoraScale(spec, file);
  if (!(spec.dropout >= 0 && spec.dropout < 1)) fail("lora_dropout", `${show(spec.dropout)} must be in [0, 1)`);
  if (spec.targets.length === 0) fail("target_modules", `is empty; list modules among ${SUPPORTED}`);
  const bad = spec.targets.find((t) => !isTarget(t));
  if (bad !== undefined) fail("target_modules", `${show(bad)} is not a module we support; supported: ${SUPPORTED}`);
}

/**
 * Writes DIR as a PEFT adapter PEFT (and vLLM) can load: adapter_config.json and
 * adapter_model.safetensors (metadata format=pt), through a temporary directory renamed into
 * place (util/atomic-write.ts: DIR is created, or replaced whole). Shapes are taken from the
 * arrays' lengths and the rank; with `config` they are also checked against the base model,
 * and every targeted module must have its adapter. Tensors are written as `dtype` (default F32).
 */
export function writePeftAdapter(
  dir: string,
  spec: LoraSpec,
  adapters: LoraAdapters,
  opts: { baseModel?: string; dtype?: DType; config?: ModelConfig } = {},
): void {
  const cfgFile = join(dir, ADAPTER_CONFIG_FILE),
    wFile = join(dir, ADAPTER_WEIGHTS_FILE);
  checkSpec(spec, cfgFile);
  const r = spec.rank,
    targets = canonical(spec.targets);
  const fail = (field: string, msg: string): never => {
    throw new ModelFormatError(wFile, field, msg);
  };
  const expected = opts.config ? new Map(loraModules(opts.config, targets).map((m) => [m.path, m])) : undefined;
  const tensors = new Map<string, HostTensor>();
  const seen = new Set<LoraTarget>();
  for (const [path, { a, b }] of adapters) {
    const m = PATH_RE.exec(path);
    const target = m ? ((m[2] ?? m[3] ?? m[4]) as LoraTarget) : undefined;
    if (!target) fail(path, "not a module path like model.layers.0.self_attn.q_proj or lm_head");
    if (!targets.includes(target!)) fail(path, `${target} is not among the spec's targets (${targets.join(", ")})`);
    seen.add(target!);
    if (!(a instanceof Float32Array) || !(b instanceof Float32Array)) fail(path, "a and b must be Float32Arrays");
    if (a.length === 0 || a.length % r !== 0 || b.length === 0 || b.length % r !== 0)
      fail(path, `a has ${a.length} and b ${b.length} values; with r = ${r} they must be (r, in) and (out, r)`);
    const inF = a.length / r,
      outF = b.length / r;
    const want = expected?.get(path);
    if (expected && !want) fail(path, "not a module of this model");
    if (want && (want.in !== inF || want.out !== outF))
      fail(
        path,
        `a is ${fmtShape([r, inF])} and b ${fmtShape([outF, r])}, but the model needs ${fmtShape([r, want.in])} and ${fmtShape([want.out, r])}`,
      );
    tensors.set(tensorName(path, "A"), { shape: [r, inF], data: a });
    tensors.set(tensorName(path, "B"), { shape: [outF, r], data: b });
  }
  const missing = expected ? [...expected.keys()].find((p) => !adapters.has(p)) : targets.find((t) => !seen.has(t));
  if (missing !== undefined) fail(missing, `no adapter given for this targeted module`);
  const config: Record<string, unknown> = {
    alpha_pattern: {},
    base_model_name_or_path: opts.baseModel ?? null,
    bias: "none",
    fan_in_fan_out: false,
    inference_mode: true,
    init_lora_weights: true,
    layers_pattern: null,
    layers_to_transform: null,
    lora_alpha: spec.alpha,
    lora_dropout: spec.dropout,
    modules_to_save: null,
    peft_type: "LORA",
    r,
    rank_pattern: {},
    revision: null,
    target_modules: [...targets].sort(),
    task_type: "CAUSAL_LM",
    use_dora: false,
    use_rslora: spec.rslora,
  };
  writeDirectory(dir, (tmp) => {
    writeFileSync(join(tmp, ADAPTER_CONFIG_FILE), JSON.stringify(config, null, 2) + "\n");
    writeSafetensorsFile(join(tmp, ADAPTER_WEIGHTS_FILE), tensors, {
      dtype: opts.dtype ?? "F32",
      metadata: { format: "pt" },
    });
  });
}

/**
 * The base weights with every adapter merged: W + scale · B @ A for each adapted module (sums in
 * float64, stored float32). Returns a new map; the input map and its tensors are not modified
 * (tensors without an adapter are shared). A scale out of range, or a merged weight that is not
 * a finite float32, is an InputError naming the module: nothing broken comes out.
 */
export function mergeAdapters(
  weights: Map<string, HostTensor>,
  spec: LoraSpec,
  adapters: LoraAdapters,
): Map<string, HostTensor> {
  const scale = checkLoraScale(spec, "LoRA merge"),
    r = spec.rank;
  const out = new Map(weights);
  for (const [path, { a, b }] of adapters) {
    const name = `${path}.weight`,
      w = weights.get(name);
    if (!w) {
      const why = path === "lm_head" ? " (a model with tied embeddings has none: its head is model.embed_tokens)" : "";
      throw new InputError(`LoRA merge: ${path} has an adapter but the base model has no ${name}${why}`);
    }
    if (w.shape.length !== 2) throw new InputError(`LoRA merge: ${name} has shape ${fmtShape(w.shape)}, not (out, in)`);
    const [rows, cols] = w.shape;
    if (a.length !== r * cols || b.length !== rows * r)
      throw new InputError(
        `LoRA merge: ${path}: A has ${a.length} values and B ${b.length}; ${name} ${fmtShape(w.shape)} and r = ${r} need ${r * cols} and ${rows * r}`,
      );
    const data = new Float32Array(w.data.length),
      acc = new Float64Array(cols);
    for (let o = 0; o < rows; o++) {
      const base = o * cols;
      for (let i = 0; i < cols; i++) acc[i] = w.data[base + i];
      for (let j = 0; j < r; j++) {
        const s = scale * b[o * r + j];
        if (s === 0) continue;
        const aj = j * cols;
        for (let i = 0; i < cols; i++) acc[i] += s * a[aj + i];
      }
      for (let i = 0; i < cols; i++) data[base + i] = acc[i];
    }
    const bad = firstNonFinite({ shape: w.shape, data });
    if (bad >= 0)
      throw new InputError(
        `LoRA merge: ${name} would hold ${describeNonFinite({ shape: w.shape, data }, bad)} once ${path}'s adapter is merged`,
        "the base weights or the adapters are not finite, or their product overflows float32",
      );
    out.set(name, { ...w, shape: [...w.shape], data });
  }
  return out;
}

/**
 * PEFT's default initialization (init_lora_weights: true), seeded: B is zero, so the adapted
 * model starts as the base model, and A is kaiming_uniform_(a = sqrt(5)) as torch's nn.Linear
 * does. For A of shape (r, in), fan_in = in, gain = sqrt(2 / (1 + a^2)) = sqrt(1/3), and the bound
 * is sqrt(3) · gain / sqrt(fan_in) = 1 / sqrt(in): A ~ U(-1/sqrt(in), 1/sqrt(in)). Module k (in
 * loraModules order) draws from Rng(seed, k), so each is reproducible on its own.
 */
export function initAdapters(config: ModelConfig, spec: LoraSpec, seed: number): LoraAdapters {
  checkSpec(spec, "LoRA spec");
  const r = spec.rank;
  const adapters: LoraAdapters = new Map();
  loraModules(config, spec.targets).forEach((m, k) => {
    const rng = new Rng(seed, k),
      bound = 1 / Math.sqrt(m.in);
    const a = new Float32Array(r * m.in);
    for (let i = 0; i < a.length; i++) a[i] = (2 * rng.next() - 1) * bound;
    adapters.set(m.path, { a, b: new Float32Array(m.out * r) });
  });
  return adapters;
}
