import { existsSync } from "node:fs";
import { join } from "node:path";
import { loadModelDir, writeModelDir } from "../../model/model-dir.js";
import { verifyCheckpoint } from "../../train/checkpoint.js";
import type { DType } from "../../model/safetensors.js";
import { noPositionals, parseFlags, requireString, usageError, type FlagSpec } from "../args.js";
import { InputError } from "../../util/errors.js";
import type { Command } from "../command.js";
import { checkOutDir } from "../../util/out-path.js";
import { FORCE_FLAG } from "./force-flag.js";

const DTYPES: Record<string, DType> = { f32: "F32", bf16: "BF16", f16: "F16" };

const FLAGS: FlagSpec = {
  checkpoint: {
    type: "string",
    value: "DIR",
    description: "a checkpoint (RUN/checkpoints/step-N) or a model directory (required)",
  },
  out: { type: "string", value: "DIR", description: "the model directory to write: new or empty (required)" },
  dtype: {
    type: "string",
    value: Object.keys(DTYPES).join("|"),
    default: "f32",
    description: "weight dtype of the written model.safetensors",
  },
  ...FORCE_FLAG,
};

/** The policy model directory inside a checkpoint (or the directory itself when it is a model). */
export function policyDir(checkpoint: string): string {
  if (!existsSync(checkpoint)) throw new InputError(`${checkpoint}: not found`);
  if (existsSync(join(checkpoint, "manifest.json"))) {
    const bad = verifyCheckpoint(checkpoint);
    if (bad) throw new InputError(`${checkpoint}: checkpoint does not verify: ${bad}`);
    return join(checkpoint, "policy");
  }
  if (existsSync(join(checkpoint, "config.json"))) return checkpoint;
  throw new InputError(`${checkpoint}: neither a checkpoint (manifest.json) nor a model directory (config.json)`);
}

export const exportCommand: Command = {
  name: "export",
  summary: "write a checkpoint's policy as a Hugging Face model directory",
  usage: "agent-r1 export --checkpoint RUN/checkpoints/step-N --out DIR [flags]",
  flags: FLAGS,
  async run(argv, io) {
    const { flags, positionals } = parseFlags("export", argv, FLAGS);
    noPositionals("export", positionals);
    const dtype = Object.hasOwn(DTYPES, flags.dtype as string) ? DTYPES[flags.dtype as string] : undefined;
    if (!dtype)
      throw usageError("export", `--dtype must be one of ${Object.keys(DTYPES).join(", ")}, got '${flags.dtype}'`);
    const checkpoint = requireString("export", flags, "checkpoint");
    const out = requireString("export", flags, "out");
    const src = policyDir(checkpoint);
    checkOutDir(out, {
      command: "export",
      force: flags.force === true,
      inputs: [{ label: "checkpoint", path: checkpoint }],
    });
    const m = loadModelDir(src);
    writeModelDir(out, { config: m.config.raw, weights: m.weights, tokenizerFrom: src, dtype });
    io.out(`wrote ${out} (${flags.dtype}, from ${src})`);
  },
};
