/**
 * LoRA adapters in Hugging Face PEFT's on-disk format, for the Qwen2 / Llama decoder.
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
 * function than PEFT would. Adapters are float32 in memory (they train in float32); F16 / BF16
 * files are widened on reading.
 */
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { z } from "zod";
import type { ModelConfig } from "./config.js";
import { readSafetensorsFile, writeSafetensorsFile, type DType, type HostTensor } from "./safetensors.js";
import { writeDirectory } from "../util/atomic-write.js";
import { InputError, ModelFormatError } from "../util/errors.js";
import { readTextInput } from "../util/read-file.js";
import { Rng } from "../util/rng.js";

export const ADAPTER_CONFIG_FILE = "adapter_config.json";
export const ADAPTER_WEIGHTS_FILE = "adapter_model.safetensors";
/** The prefix PEFT puts in front of the base model's module paths (PeftModel.base_model.model). */
const PREFIX = "base_model.model.";

/** The linear modules of the decoder a LoRA can adapt, in the order adapters are listed. */
export const LORA_TARGETS = [
  "q_proj",
  "k_proj",
  "v_proj",
  "o_proj",
  "gate_proj",
  "up_proj",
  "down_proj",
  "lm_head",
] as const;
export type LoraTarget = (typeof LORA_TARGETS)[number];
const ATTN_TARGETS: readonly LoraTarget[] = ["q_proj", "k_proj", "v_proj", "o_proj"];
const MLP_TARGETS: readonly LoraTarget[] = ["gate_proj", "up_proj", "down_proj"];
const isTarget = (s: string): s is LoraTarget => (LORA_TARGETS as readonly string[]).includes(s);
const SUPPORTED = LORA_TARGETS.join(", ");

export interface LoraSpec {
  rank: number;
  alpha: number;
  dropout: number;
  /** In LORA_TARGETS order. */
  targets: LoraTarget[];
  /** Rank-stabilized scaling, alpha / sqrt(r). */
  rslora: boolean;
}

/** One module's adapter: A is (r, in) and B is (out, r), row-major, as PEFT stores them. */
export interface LoraAdapter {
  a: Float32Array;
  b: Float32Array;
}
/** Keyed by the base parameter name without ".weight": "model.layers.0.self_attn.q_proj", "lm_head". */
export type LoraAdapters = Map<string, LoraAdapter>;

/** The factor on B·A: alpha / r, or alpha / sqrt(r) with rsLoRA. */
export function loraScale(spec: Pick<LoraSpec, "rank" | "alpha" | "rslora">): number {
  return spec.rslora ? spec.alpha / Math.sqrt(spec.rank) : spec.alpha / spec.rank;
}

/** Targets in canonical (LORA_TARGETS) order, without repeats. */
const canonical = (targets: Iterable<LoraTarget>): LoraTarget[] => {
  const set = new Set(targets);
  return LORA_TARGETS.filter((t) => set.has(t));
};

/** Tinker's LoRA switches as PEFT targets: attention = q, k, v, o; MLP = gate, up, down; unembedding = lm_head. */
export function targetsFromTinker(o: { trainAttn: boolean; trainMlp: boolean; trainUnembed: boolean }): LoraTarget[] {
  return canonical([
    ...(o.trainAttn ? ATTN_TARGETS : []),
    ...(o.trainMlp ? MLP_TARGETS : []),
    ...(o.trainUnembed ? (["lm_head"] as const) : []),
  ]);
}

/**
 * The reverse: Tinker's switches for a target list, or undefined when the list takes part of a
 * group (say q_proj and v_proj only), which Tinker cannot express.
 */
export function tinkerFromTargets(
  targets: readonly LoraTarget[],
): { trainAttn: boolean; trainMlp: boolean; trainUnembed: boolean } | undefined {
  const set = new Set(targets);
  const group = (g: readonly LoraTarget[]) => {
    const n = g.filter((t) => set.has(t)).length;
    return n === 0 ? false : n === g.length ? true : undefined;
  };
  const trainAttn = group(ATTN_TARGETS),
    trainMlp = group(MLP_TARGETS);
  if (trainAttn === undefined || trainMlp === undefined) return undefined;
  return { trainAttn, trainMlp, trainUnembed: set.has("lm_head") };
}

/** In words, for logs: "attention (q_proj, k_proj, v_proj, o_proj) + MLP (...) + unembedding (lm_head)". */
export function describeTargets(targets: readonly LoraTarget[]): string {
  const t = canonical(targets);
  if (t.length === 0) return "no modules";
  const parts: string[] = [];
  const attn = t.filter((x) => ATTN_TARGETS.includes(x)),
    mlp = t.filter((x) => MLP_TARGETS.includes(x));
  if (attn.length) parts.push(`attention (${attn.join(", ")})`);
  if (mlp.length) parts.push(`MLP (${mlp.join(", ")})`);
  if (t.includes("lm_head")) parts.push("unembedding (lm_head)");
  return parts.join(" + ");
}

/** One linear module a LoRA adapts: its Hugging Face path (the weight's name without ".weight") and (out, in). */
export interface LoraModule {
  path: string;
  target: LoraTarget;
  out: number;
  in: number;
}

const TIED_HEAD =
  "lm_head is targeted but this model ties the head to the input embedding (tie_word_embeddings in config.json): " +
  "the head is model.embed_tokens, one matrix that a LoRA on lm_head would change for the input too; " +
  "leave lm_head out (train_unembed false) or use an untied model";

/** The (out, in) of each target in this model (the shapes of parameterShapes in transformer.ts). */
function targetShapes(c: ModelConfig): Record<LoraTarget, [number, number]> {
  const h = c.hiddenSize,
    q = c.numHeads * c.headDim,
    kv = c.numKvHeads * c.headDim,
    f = c.intermediateSize;
  return {
    q_proj: [q, h],
    k_proj: [kv, h],
    v_proj: [kv, h],
    o_proj: [h, q],
    gate_proj: [f, h],
    up_proj: [f, h],
    down_proj: [h, f],
    lm_head: [c.vocabSize, h],
  };
}

const modulePath = (layer: number, t: LoraTarget): string =>
  t === "lm_head" ? "lm_head" : `model.layers.${layer}.${ATTN_TARGETS.includes(t) ? "self_attn" : "mlp"}.${t}`;

/**
 * The modules a spec's targets adapt in this model, layer by layer (targets in LORA_TARGETS order
 * within a layer), then lm_head. Throws an InputError for lm_head on a tied-embedding model.
 */
export function loraModules(config: ModelConfig, targets: readonly LoraTarget[]): LoraModule[] {
  const t = canonical(targets);
  if (t.includes("lm_head") && config.tieWordEmbeddings) throw new InputError(TIED_HEAD);
  const shapes = targetShapes(config);
  const out: LoraModule[] = [];
  for (let i = 0; i < config.numLayers; i++)
    for (const target of t) if (target !== "lm_head") out.push(mod(modulePath(i, target), target, shapes));
  if (t.includes("lm_head")) out.push(mod("lm_head", "lm_head", shapes));
  return out;
}
const mod = (path: string, target: LoraTarget, shapes: Record<LoraTarget, [number, number]>): LoraModule => ({
  path,
  target,
  out: shapes[target][0],
  in: shapes[target][1],
});

/**
 * Every module name of Qwen2ForCausalLM / LlamaForCausalLM (torch's named_modules(), the root
 * left out), with the LoRA target each linear one is. A target_modules regex is matched against these.
 */
function namedModules(c: ModelConfig): { name: string; target?: LoraTarget; layer?: number }[] {
  const m: { name: string; target?: LoraTarget; layer?: number }[] = [
    { name: "model" },
    { name: "model.embed_tokens" },
    { name: "model.layers" },
  ];
  for (let i = 0; i < c.numLayers; i++) {
    const p = `model.layers.${i}`;
    m.push({ name: p }, { name: `${p}.self_attn` });
    for (const t of ATTN_TARGETS) m.push({ name: modulePath(i, t), target: t, layer: i });
    m.push({ name: `${p}.mlp` });
    for (const t of MLP_TARGETS) m.push({ name: modulePath(i, t), target: t, layer: i });
    m.push({ name: `${p}.mlp.act_fn` }, { name: `${p}.input_layernorm` }, { name: `${p}.post_attention_layernorm` });
  }
  m.push({ name: "model.norm" }, { name: "model.rotary_emb" }, { name: "lm_head", target: "lm_head" });
  return m;
}

// ---------------------------------------------------------------------------------------------
// adapter_config.json

const moduleList = z
  .union([z.array(z.string()), z.string()])
  .nullable()
  .optional();
/** The keys we read; PEFT adds keys over versions, and unknown ones are ignored. */
const peftConfigSchema = z.object({
  peft_type: z.string(),
  task_type: z.string().nullable().optional(),
  r: z.number().int("must be a positive integer").positive("must be a positive integer").default(8),
  lora_alpha: z.number().positive("must be a positive number").finite().default(8),
  lora_dropout: z.number().min(0, "must be in [0, 1)").lt(1, "must be in [0, 1)").default(0),
  target_modules: moduleList,
  exclude_modules: moduleList,
  bias: z.string().default("none"),
  use_rslora: z.boolean().default(false),
  use_dora: z.boolean().default(false),
  fan_in_fan_out: z.boolean().default(false),
  lora_bias: z.boolean().default(false),
  base_model_name_or_path: z.string().nullable().optional(),
  modules_to_save: z.unknown().optional(),
  layers_to_transform: z.unknown().optional(),
  layers_pattern: z.unknown().optional(),
  rank_pattern: z.unknown().optional(),
  alpha_pattern: z.unknown().optional(),
  target_parameters: z.unknown().optional(),
  trainable_token_indices: z.unknown().optional(),
  layer_replication: z.unknown().optional(),
  megatron_config: z.unknown().optional(),
  loftq_config: z.unknown().optional(),
  use_qalora: z.unknown().optional(),
  alora_invocation_tokens: z.unknown().optional(),
  use_bdlora: z.unknown().optional(),
  arrow_config: z.unknown().optional(),
  velora_config: z.unknown().optional(),
  monteclora_config: z.unknown().optional(),
});
type PeftConfigJson = z.infer<typeof peftConfigSchema>;

/** Set as PEFT tests it (truthiness): not null, false, "", [] or {}. */
const isSet = (v: unknown): boolean =>
  v !== undefined &&
  v !== null &&
  v !== false &&
  v !== "" &&
  !(Array.isArray(v) && v.length === 0) &&
  !(typeof v === "object" && !Array.isArray(v) && Object.keys(v as object).length === 0);

/** Options that change what the adapter computes or which weights it holds, and what we support instead. */
const REFUSED: [keyof PeftConfigJson, string][] = [
  ["use_dora", "DoRA is not supported; only plain LoRA (use_dora: false)"],
  [
    "fan_in_fan_out",
    "weights stored (in, out) (GPT-2 Conv1D) are not supported; Qwen2/Llama linears are (out, in), fan_in_fan_out: false",
  ],
  ["lora_bias", "a trained bias on lora_B is not supported; only lora_bias: false"],
  [
    "modules_to_save",
    "fully trained extra modules are not supported; only LoRA on the targets (modules_to_save: null)",
  ],
  [
    "layers_to_transform",
    "LoRA on some layers only is not supported; adapters cover every layer (layers_to_transform: null)",
  ],
  ["layers_pattern", "layer selection is not supported; adapters cover every layer (layers_pattern: null)"],
  ["rank_pattern", "per-module ranks are not supported; one r for every module (rank_pattern: {})"],
  ["alpha_pattern", "per-module alphas are not supported; one lora_alpha for every module (alpha_pattern: {})"],
  [
    "target_parameters",
    "LoRA on bare parameters (MoE experts) is not supported; only linear modules (target_parameters: null)",
  ],
  ["trainable_token_indices", "training selected token embeddings is not supported (trainable_token_indices: null)"],
  ["layer_replication", "layer replication is not supported (layer_replication: null)"],
  ["megatron_config", "Megatron parallel layers are not supported (megatron_config: null)"],
  ["loftq_config", "LoftQ (a quantized base) is not supported (loftq_config: {})"],
  ["use_qalora", "QALoRA is not supported; only plain LoRA (use_qalora: false)"],
  ["alora_invocation_tokens", "activated LoRA is not supported; only plain LoRA (alora_invocation_tokens: null)"],
  ["use_bdlora", "block-diagonal LoRA is not supported; only plain LoRA (use_bdlora: null)"],
  ["arrow_config", "Arrow routing is not supported; only plain LoRA (arrow_config: null)"],
  ["velora_config", "VeLoRA is not supported; only plain LoRA (velora_config: null)"],
  ["monteclora_config", "MonteCLoRA is not supported; only plain LoRA (monteclora_config: null)"],
];

const show = (v: unknown) => {
  const s = JSON.stringify(v) ?? String(v);
  return s.length > 80 ? s.slice(0, 77) + "..." : s;
};

/** Python `re` syntax that JavaScript spells differently; fullmatch = anchored at both ends. */
function pythonFullmatch(pattern: string): RegExp {
  const js = pattern
    .replace(/\(\?P<([A-Za-z_]\w*)>/g, "(?<$1>")
    .replace(/\(\?P=([A-Za-z_]\w*)\)/g, "\\k<$1>")
    .replace(/\\A/g, "^")
    .replace(/\\Z/g, "$");
  return new RegExp(`^(?:${js})$`);
}

/** PEFT's module matching: a regex fully matches the name; a list entry equals it or is its last dotted part(s). */
function matcher(spec: string[] | string, file: string, field: string): (name: string) => boolean {
  if (typeof spec === "string") {
    let re: RegExp;
    try {
      re = pythonFullmatch(spec);
    } catch (e) {
      throw new ModelFormatError(
        file,
        field,
        `${show(spec)} is not a regular expression we can read: ${(e as Error).message}`,
      );
    }
    return (name) => re.test(name);
  }
  return (name) => spec.some((s) => name === s || name.endsWith(`.${s}`));
}

/** target_modules (and exclude_modules) resolved against this model: the targets, each on every layer. */
function resolveTargets(c: PeftConfigJson, config: ModelConfig, file: string): LoraTarget[] {
  const tm = c.target_modules;
  const modules = namedModules(config);
  let chosen: typeof modules;
  if (tm === undefined || tm === null) {
    // PEFT's default for llama and qwen2 when no target_modules is given.
    chosen = modules.filter((m) => m.target === "q_proj" || m.target === "v_proj");
  } else if (tm === "all-linear") {
    // PEFT's wildcard: every linear layer except the output layer.
    chosen = modules.filter((m) => m.target !== undefined && m.target !== "lm_head");
  } else if (Array.isArray(tm)) {
    if (tm.length === 0)
      throw new ModelFormatError(file, "target_modules", `is empty; list modules among ${SUPPORTED}`);
    const bad = tm.find((t) => !isTarget(t));
    if (bad !== undefined)
      throw new ModelFormatError(
        file,
        "target_modules",
        `${show(bad)} is not a module we support; supported: ${SUPPORTED}`,
      );
    chosen = modules.filter((m) => m.target !== undefined && tm.includes(m.target));
  } else {
    const match = matcher(tm, file, "target_modules");
    chosen = modules.filter((m) => match(m.name));
    const other = chosen.find((m) => m.target === undefined);
    if (other)
      throw new ModelFormatError(
        file,
        "target_modules",
        `the regular expression ${show(tm)} matches ${other.name}, which is not a module we support; supported: ${SUPPORTED}`,
      );
    if (chosen.length === 0)
      throw new ModelFormatError(
        file,
        "target_modules",
        `the regular expression ${show(tm)} matches no module of this model`,
      );
  }
  const ex = c.exclude_modules;
  let field = "target_modules";
  if (ex !== undefined && ex !== null && ex.length > 0) {
    const match = matcher(ex, file, "exclude_modules");
    const kept = chosen.filter((m) => !match(m.name));
    if (kept.length !== chosen.length) field = "exclude_modules";
    chosen = kept;
  }
  if (chosen.length === 0) throw new ModelFormatError(file, field, "leaves no module to adapt");
  // Every targeted kind of module must be adapted in every layer.
  const targets = canonical(chosen.map((m) => m.target!));
  for (const t of targets) {
    if (t === "lm_head") continue;
    const layers = chosen.filter((m) => m.target === t).map((m) => m.layer!);
    if (layers.length !== config.numLayers) {
      const list = layers.length > 6 ? `${layers.slice(0, 6).join(", ")}, ...` : layers.join(", ");
      throw new ModelFormatError(
        file,
        field,
        `adapts ${t} in layer${layers.length === 1 ? "" : "s"} ${list} of ${config.numLayers}; we support a target on every layer only`,
      );
    }
  }
  if (targets.includes("lm_head") && config.tieWordEmbeddings) throw new ModelFormatError(file, field, TIED_HEAD);
  return targets;
}

function parseConfig(dir: string, config: ModelConfig): { spec: LoraSpec; baseModel?: string } {
  const file = join(dir, ADAPTER_CONFIG_FILE);
  const text = readTextInput(file, (words) => new ModelFormatError(file, undefined, words));
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    throw new ModelFormatError(file, undefined, `not valid JSON: ${(e as Error).message}`);
  }
  if (typeof json !== "object" || json === null || Array.isArray(json))
    throw new ModelFormatError(file, undefined, "must be a JSON object");
  const res = peftConfigSchema.safeParse(json);
  if (!res.success) {
    const issue = res.error.issues[0];
    throw new ModelFormatError(file, issue.path.join(".") || undefined, issue.message.replace(/\s*\n\s*/g, " "));
  }
  const c = res.data;
  if (c.peft_type !== "LORA")
    throw new ModelFormatError(file, "peft_type", `${show(c.peft_type)} is not supported; only LORA adapters are`);
  if (c.task_type != null && c.task_type !== "CAUSAL_LM")
    throw new ModelFormatError(
      file,
      "task_type",
      `${show(c.task_type)} is not supported; only CAUSAL_LM (a LoRA on a causal language model)`,
    );
  if (c.bias !== "none")
    throw new ModelFormatError(file, "bias", `${show(c.bias)} trains biases, which is not supported; only "none"`);
  for (const [key, why] of REFUSED) {
    if (isSet(c[key])) throw new ModelFormatError(file, key, `set to ${show(c[key])}; ${why}`);
  }
  const targets = resolveTargets(c, config, file);
  const spec: LoraSpec = { rank: c.r, alpha: c.lora_alpha, dropout: c.lora_dropout, targets, rslora: c.use_rslora };
  const base = c.base_model_name_or_path;
  return base ? { spec, baseModel: base } : { spec };
}

// ---------------------------------------------------------------------------------------------
// Reading and writing

const tensorName = (path: string, which: "A" | "B") => `${PREFIX}${path}.lora_${which}.weight`;
const fmtShape = (s: readonly number[]) => `[${s.join(", ")}]`;

/** The LoRA spec of a PEFT adapter directory (its adapter_config.json only, checked against `config`). */
export function readPeftSpec(dir: string, config: ModelConfig): LoraSpec {
  return parseConfig(dir, config).spec;
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
  const { spec, baseModel } = parseConfig(dir, config);
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
 * (tensors without an adapter are shared).
 */
export function mergeAdapters(
  weights: Map<string, HostTensor>,
  spec: LoraSpec,
  adapters: LoraAdapters,
): Map<string, HostTensor> {
  const scale = loraScale(spec),
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
