/**
 * What a Tinker engine keeps on local disk: remote.json (where a checkpoint lives on the server,
 * read strictly) and the model's shape from the config.json beside its tokenizer.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { z } from "zod";
import type { Tokenizer } from "../../model/tokenizer.js";
import { InputError } from "../../util/errors.js";
import { readJsonFile } from "../../model/model-dir.js";

/** remote.json: where a checkpoint of this engine lives on the server. */
export const remoteStateSchema = z.strictObject({
  kind: z.literal("tinker"),
  url: z.string(),
  baseModel: z.string(),
  lora: z
    .strictObject({
      rank: z.number().int().positive(),
      seed: z.number().int().optional(),
      trainAttn: z.boolean(),
      trainMlp: z.boolean(),
      trainUnembed: z.boolean(),
    })
    .optional(),
  /** The saved state (weights and optimizer), `tinker://...`. */
  path: z.string().startsWith("tinker://"),
  step: z.number().int().nonnegative(),
  /** The SDK version the run spoke. */
  sdkVersion: z.string().optional(),
});
export type RemoteState = z.infer<typeof remoteStateSchema>;

export const REMOTE_FILE = "remote.json";

/** The remote.json of a directory; an InputError naming the file when it is malformed. */
export function readRemoteState(dir: string): RemoteState {
  const file = join(dir, REMOTE_FILE);
  const res = remoteStateSchema.safeParse(readJsonFile(file));
  if (!res.success) {
    const issue = res.error.issues[0];
    throw new InputError(`${file}: ${issue.path.join(".") || "(root)"}: ${issue.message}`);
  }
  return res.data;
}

/** The context window and vocabulary: from config.json beside the tokenizer, else the tokenizer's size and 32k. */
export function contextOf(dir: string, tokenizer: Tokenizer): { maxPositionEmbeddings: number; vocabSize: number } {
  const file = join(dir, "config.json");
  const raw = existsSync(file) ? (readJsonFile(file) as Record<string, unknown>) : {};
  const num = (k: string) => (typeof raw[k] === "number" && (raw[k] as number) > 0 ? (raw[k] as number) : undefined);
  return {
    maxPositionEmbeddings: num("max_position_embeddings") ?? 32_768,
    vocabSize: num("vocab_size") ?? tokenizer.vocabSize,
  };
}
