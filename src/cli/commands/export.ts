/**
 * `agent-r1 export`: a checkpoint's policy (or a model or LoRA directory) written for other tools.
 *  - full weights: a Hugging Face model directory;
 *  - LoRA adapters: the adapter directory in PEFT's layout, naming the base as the adapters do
 *    (the base weights are not copied), which PEFT and vLLM load next to the base;
 *  - LoRA adapters with --merge: a full model directory, the base with W + scale · B·A merged in;
 *  - with --gguf, full weights (or merged ones) also as DIR/model.gguf, llama.cpp's format.
 * Weights keep the dtype they are stored in unless --dtype converts them, and are read raw: no
 * float32 copy of a 16-bit model and none of the engine's size limits, so any model exports.
 * Everything is read and checked before --out is touched; the directory is then written through
 * a temporary sibling renamed into place (util/atomic-write.ts), so a failure leaves nothing half-written.
 */
import { copyFileSync, existsSync, renameSync } from "node:fs";
import { join } from "node:path";
import { GGUF_MODEL_TYPES, ggufTokenizer, writeGguf } from "../../model/gguf.js";
import { Tokenizer } from "../../model/tokenizer.js";
import {
  copyTokenizerFiles,
  readJsonFile,
  readModelConfig,
  writeModelDir,
  writtenDType,
  writtenDTypes,
} from "../../model/model-dir.js";
import { checkWeightFiles } from "../../model/model-limits.js";
import {
  ADAPTER_CONFIG_FILE,
  ADAPTER_WEIGHTS_FILE,
  describeTargets,
  mergeAdapters,
  readPeftAdapter,
  type LoraAdapters,
  type LoraSpec,
} from "../../model/peft.js";
import {
  fromFloat32,
  loadModelWeightsRaw,
  readSafetensorsFileRaw,
  toFloat32,
  weightsFile,
  writeSafetensorsFile,
  type DType,
  type HostTensor,
  type RawTensor,
} from "../../model/safetensors.js";
import { checkFiniteTensors } from "../../model/finite-weights.js";
import { isLoraDir, loraBaseDir } from "../../engine/local/native/lora-checkpoint.js";
import { verifyCheckpoint } from "../../train/checkpoint.js";
import { noPositionals, parseFlags, requireString, usageError, type FlagSpec } from "../args.js";
import { InputError } from "../../util/errors.js";
import { writeDirectory } from "../../util/atomic-write.js";
import type { Command } from "../command.js";
import { checkOutDir } from "../../util/out-path.js";
import { FORCE_FLAG } from "./force-flag.js";

const GGUF_FILE = "model.gguf";

const DTYPES: Record<string, DType> = { f32: "F32", bf16: "BF16", f16: "F16" };
const FLAG_NAME: Record<DType, string> = { F32: "f32", BF16: "bf16", F16: "f16" };

const FLAGS: FlagSpec = {
  checkpoint: {
    type: "string",
    value: "DIR",
    description: "a checkpoint (RUN/checkpoints/step-N), a model directory or a LoRA adapter directory (required)",
  },
  out: { type: "string", value: "DIR", description: "the directory to write: new or empty (required)" },
  dtype: {
    type: "string",
    value: Object.keys(DTYPES).join("|"),
    fallback: "each tensor's stored dtype",
    description: "convert the written weights to this dtype",
  },
  merge: {
    type: "boolean",
    default: false,
    description: "merge LoRA adapters into their base weights and write a full model directory",
  },
  gguf: {
    type: "boolean",
    default: false,
    description: `also write the full weights as DIR/${GGUF_FILE} for llama.cpp (Qwen2 models; with LoRA adapters, needs --merge)`,
  },
  ...FORCE_FLAG,
};

type Tensors = Map<string, HostTensor | RawTensor>;

/** The policy directory inside a checkpoint, or the directory itself when it is a model or a LoRA directory. */
export function policyDir(checkpoint: string): string {
  if (!existsSync(checkpoint)) throw new InputError(`${checkpoint}: not found`);
  if (existsSync(join(checkpoint, "manifest.json"))) {
    const bad = verifyCheckpoint(checkpoint);
    if (bad) throw new InputError(`${checkpoint}: checkpoint does not verify: ${bad}`);
    return join(checkpoint, "policy");
  }
  if (existsSync(join(checkpoint, "config.json")) || isLoraDir(checkpoint)) return checkpoint;
  throw new InputError(
    `${checkpoint}: neither a checkpoint (manifest.json), a model directory (config.json) nor a LoRA adapter directory (${ADAPTER_CONFIG_FILE})`,
  );
}

/**
 * A model directory's config and weights, each tensor in its stored dtype; the file sizes are
 * checked against config.json first, and every weight must be finite (nothing broken is exported).
 */
function readModelRaw(dir: string): { raw: Record<string, unknown>; weights: Map<string, RawTensor> } {
  const config = readModelConfig(dir);
  checkWeightFiles(dir, config);
  const weights = loadModelWeightsRaw(dir);
  checkFiniteTensors(weightsFile(dir), weights);
  return { raw: config.raw, weights };
}

const label = (dtypes: DType[]) => dtypes.map((d) => FLAG_NAME[d]).join(" + ") || "no tensors";

/**
 * The base weights with each adapter merged, module by module: the base matrix is widened to
 * float32, merged by mergeAdapters, and narrowed at once to the dtype it is written in (`dtype`,
 * or the base's), so only one float32 matrix exists at a time. Other tensors are shared.
 */
function mergeInto(
  weights: Map<string, RawTensor>,
  spec: LoraSpec,
  adapters: LoraAdapters,
  dtype: DType | undefined,
): Tensors {
  const out: Tensors = new Map(weights);
  for (const [path, adapter] of adapters) {
    const name = `${path}.weight`,
      w = weights.get(name);
    // mergeAdapters names a missing or misshapen base matrix
    const wide = new Map<string, HostTensor>(w ? [[name, { shape: w.shape, data: toFloat32(w) }]] : []);
    const merged = mergeAdapters(wide, spec, new Map([[path, adapter]])).get(name)!;
    const to = writtenDType(w!, dtype);
    out.set(name, { dtype: to, shape: merged.shape, data: fromFloat32(merged.data, to) });
  }
  return out;
}

/** The GGUF file of a model being exported: prepared (and checked) before anything is written, written after. */
function ggufWriter(src: string, weights: Map<string, RawTensor>, dtype: DType | undefined): (out: string) => string {
  const config = readModelConfig(src);
  if (!GGUF_MODEL_TYPES.includes(config.modelType))
    throw new InputError(
      `export: --gguf: ${src} is a ${config.modelType} model; the GGUF writer handles ${GGUF_MODEL_TYPES.join(" and ")} only`,
    );
  const tokenizer = ggufTokenizer(
    readJsonFile(join(src, "tokenizer.json")),
    config.vocabSize,
    Tokenizer.fromDir(src).eosTokenId,
  );
  return (out) => {
    const narrow = new Map<string, RawTensor>();
    for (const [name, t] of weights) {
      const to = writtenDType(t, dtype);
      narrow.set(name, to === t.dtype ? t : { dtype: to, shape: t.shape, data: fromFloat32(toFloat32(t), to) });
    }
    const path = join(out, GGUF_FILE);
    writeGguf(`${path}.tmp`, config, narrow, tokenizer);
    renameSync(`${path}.tmp`, path);
    return `wrote ${path}: the same weights in llama.cpp's GGUF format`;
  };
}

/** Full weights in, a model directory out (and its GGUF file, with gguf). */
function exportModel(src: string, out: string, dtype: DType | undefined, gguf: boolean): string[] {
  const { raw, weights } = readModelRaw(src);
  const toGguf = gguf ? ggufWriter(src, weights, dtype) : undefined;
  writeModelDir(out, { config: raw, weights, tokenizerFrom: src, dtype });
  const line = `wrote ${out}: a Hugging Face model directory (${label(writtenDTypes(weights, dtype))}, from ${src})`;
  return toGguf ? [line, toGguf(out)] : [line];
}

/** A LoRA directory's base (checked to exist) and adapters (checked against the base's config.json). */
function readLora(loraDir: string) {
  const base = loraBaseDir(loraDir);
  const config = readModelConfig(base);
  const { spec, adapters, baseModel } = readPeftAdapter(loraDir, config);
  return { base, config, spec, adapters, baseModel };
}

const loraWords = (spec: LoraSpec) => `r ${spec.rank}, alpha ${spec.alpha}, on ${describeTargets(spec.targets)}`;

/**
 * The adapters in PEFT's layout: adapter_config.json as it is (base_model_name_or_path kept),
 * adapter_model.safetensors with the stored tensors (converted with `dtype`), and tokenizer
 * files (the LoRA directory's, else the base's). No base weights, optimizer state or config.json.
 */
function exportAdapters(loraDir: string, out: string, dtype: DType | undefined): string[] {
  const { base, spec, baseModel } = readLora(loraDir);
  const file = readSafetensorsFileRaw(join(loraDir, ADAPTER_WEIGHTS_FILE));
  const tokenizerFrom = existsSync(join(loraDir, "tokenizer.json")) ? loraDir : base;
  let tokenizer: string[] = [];
  writeDirectory(out, (tmp) => {
    copyFileSync(join(loraDir, ADAPTER_CONFIG_FILE), join(tmp, ADAPTER_CONFIG_FILE));
    writeSafetensorsFile(join(tmp, ADAPTER_WEIGHTS_FILE), file.tensors, {
      ...(dtype && { dtype }),
      metadata: { ...file.metadata, format: "pt" },
    });
    tokenizer = copyTokenizerFiles(tokenizerFrom, tmp);
  });
  const files = [
    ADAPTER_CONFIG_FILE,
    `${ADAPTER_WEIGHTS_FILE} (${label(writtenDTypes(file.tensors, dtype))})`,
    ...tokenizer,
  ];
  return [
    `wrote ${out}: LoRA adapters in PEFT's layout (${files.join(", ")}), ${loraWords(spec)}`,
    `base model: ${baseModel ?? base} (not copied; load the adapters next to it with PEFT or vLLM, or export --merge for full weights)`,
  ];
}

/** The base weights with the adapters merged in, as a model directory with the base's config.json and tokenizer files. */
function exportMerged(loraDir: string, out: string, dtype: DType | undefined, gguf: boolean): string[] {
  const { base, spec, adapters } = readLora(loraDir);
  const { raw, weights } = readModelRaw(base);
  const merged = mergeInto(weights, spec, adapters, dtype);
  const toGguf = gguf ? ggufWriter(base, merged as Map<string, RawTensor>, dtype) : undefined;
  writeModelDir(out, { config: raw, weights: merged, tokenizerFrom: base, dtype });
  const line = `wrote ${out}: ${base} with LoRA adapters merged into ${adapters.size} modules (${loraWords(spec)}), ${label(writtenDTypes(merged, dtype))}`;
  return toGguf ? [line, toGguf(out)] : [line];
}

/** --dtype as a DType, or undefined to keep each tensor's own. */
function parseDType(value: unknown): DType | undefined {
  if (value === undefined) return undefined;
  const dtype = Object.hasOwn(DTYPES, value as string) ? DTYPES[value as string] : undefined;
  if (!dtype) throw usageError("export", `--dtype must be one of ${Object.keys(DTYPES).join(", ")}, got '${value}'`);
  return dtype;
}

export const exportCommand: Command = {
  name: "export",
  summary: "write a checkpoint's policy as a Hugging Face model directory, or its LoRA adapters in PEFT's layout",
  usage: "agent-r1 export --checkpoint RUN/checkpoints/step-N --out DIR [flags]",
  flags: FLAGS,
  async run(argv, io) {
    const { flags, positionals } = parseFlags("export", argv, FLAGS);
    noPositionals("export", positionals);
    const dtype = parseDType(flags.dtype);
    const checkpoint = requireString("export", flags, "checkpoint");
    const out = requireString("export", flags, "out");
    const src = policyDir(checkpoint);
    const lora = isLoraDir(src);
    checkOutDir(out, {
      command: "export",
      force: flags.force === true,
      inputs: [
        { label: "checkpoint", path: checkpoint },
        { label: "base model", path: lora ? loraBaseDir(src) : undefined },
      ],
    });
    if (flags.gguf === true && lora && flags.merge !== true)
      throw new InputError(
        `export: --gguf: ${src} holds LoRA adapters; llama.cpp's file holds full weights`,
        "add --merge to write the merged model and its GGUF file",
      );
    if (flags.merge === true && !lora)
      throw new InputError(
        `export: --merge: ${src} holds full weights, no LoRA adapters (${ADAPTER_CONFIG_FILE} without model weights)`,
        "drop --merge to export the model as it is",
      );
    const gguf = flags.gguf === true;
    const lines = !lora
      ? exportModel(src, out, dtype, gguf)
      : flags.merge === true
        ? exportMerged(src, out, dtype, gguf)
        : exportAdapters(src, out, dtype);
    for (const line of lines) io.out(line);
  },
};
