/** Writes a randomly initialized model directory in Hugging Face format for a preset. */
import { join } from "node:path";
import { existsSync } from "node:fs";
import { parseModelConfig, presetConfigJson, PRESETS, type PresetName } from "./config.js";
import { Tokenizer } from "./tokenizer.js";
import { randomHostWeights } from "./parameter-shapes.js";
import { writeModelDir } from "./model-dir.js";
import { defaultTokenizerDir } from "./default-tokenizer.js";
import { InputError, ModelFormatError } from "../util/errors.js";

export interface InitModelOptions {
  preset: PresetName;
  out: string;
  /** Directory holding tokenizer.json (+ tokenizer_config.json). Default: the tokenizer shipped with the package. */
  tokenizer?: string;
  seed?: number;
  /** Config fields to override, such as max_position_embeddings. */
  overrides?: Record<string, unknown>;
}

export async function initModel(o: InitModelOptions): Promise<{ dir: string; parameters: number }> {
  if (!(o.preset in PRESETS))
    throw new InputError(`unknown preset '${o.preset}'; choose one of: ${Object.keys(PRESETS).join(", ")}`);
  const tokDir = o.tokenizer ?? defaultTokenizerDir();
  if (!existsSync(join(tokDir, "tokenizer.json")))
    throw new ModelFormatError(join(tokDir, "tokenizer.json"), undefined, "file not found");
  const tokenizer = Tokenizer.fromDir(tokDir);
  // Round the embedding table up to a multiple of 64, as released checkpoints do.
  const vocab = Math.ceil(tokenizer.vocabSize / 64) * 64;
  const raw = presetConfigJson(o.preset, vocab, {
    eos_token_id: tokenizer.eosTokenId ?? null,
    ...o.overrides,
  });
  const config = parseModelConfig(raw, "(preset)");
  const weights = randomHostWeights(config, o.seed ?? 0);
  writeModelDir(o.out, { config: raw, weights, tokenizerFrom: tokDir });
  let parameters = 0;
  for (const w of weights.values()) parameters += w.data.length;
  return { dir: o.out, parameters };
}
