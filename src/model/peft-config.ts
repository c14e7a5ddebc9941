/**
 * PEFT's adapter_config.json: read, checked option by option (anything that would make the adapter
 * compute another function than plain LoRA is refused by name), and target_modules /
 * exclude_modules resolved against the model's modules as PEFT matches them.
 */
import { join } from "node:path";
import { z } from "zod";
import type { ModelConfig } from "./config.js";
import {
  ADAPTER_CONFIG_FILE,
  ATTN_TARGETS,
  MLP_TARGETS,
  SUPPORTED,
  TIED_HEAD,
  canonical,
  isTarget,
  loraScale,
  modulePath,
  type LoraSpec,
  type LoraTarget,
} from "./peft-targets.js";
import { ModelFormatError } from "../util/errors.js";
import { readTextInput } from "../util/read-file.js";

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
    "weights stored (in, out) (GPT-2 Conv1D) are not supported; Qwen2/Qwen3/Llama linears are (out, in), fan_in_fan_out: false",
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

/**
 * The largest scale an adapter may have (lora_alpha / r, or lora_alpha / sqrt(r) with rsLoRA).
 * Released adapters use 0.5 to 4 or so; a scale past this multiplies B·A into weights far
 * outside any trained model's (and at 1e38, float32's range).
 */
export const MAX_LORA_SCALE = 1e4;

/** The adapter scale of `spec`, checked to be finite and at most MAX_LORA_SCALE; else a ModelFormatError naming lora_alpha. */
export function checkLoraScale(spec: Pick<LoraSpec, "rank" | "alpha" | "rslora">, file: string): number {
  const scale = loraScale(spec);
  if (Number.isFinite(scale) && Math.abs(scale) <= MAX_LORA_SCALE) return scale;
  const how = spec.rslora ? `lora_alpha / sqrt(r) with r = ${spec.rank}` : `lora_alpha / r with r = ${spec.rank}`;
  throw new ModelFormatError(
    file,
    "lora_alpha",
    `${show(spec.alpha)} gives an adapter scale (${how}) of ${scale}, outside [-${MAX_LORA_SCALE}, ${MAX_LORA_SCALE}]`,
    "released adapters scale by 0.5 to 4 or so: lora_alpha is usually r or 2·r",
  );
}

/** A config value for an error message, at most 80 characters. */
export const show = (v: unknown) => {
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

/** The spec and base model an adapter directory's adapter_config.json describes, for a model with `config`. */
export function parsePeftConfig(dir: string, config: ModelConfig): { spec: LoraSpec; baseModel?: string } {
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
  checkLoraScale(spec, file);
  const base = c.base_model_name_or_path;
  return base ? { spec, baseModel: base } : { spec };
}
