/**
 * Whether a model can be loaded, decided from config.json and file sizes before any weight is
 * read. The weight files must not be larger than config.json allows (checkWeightFiles: ./model-dir.ts
 * checks it before reading weights either way). A model read in float32 (loadModelDir, as the TF.js
 * engine reads it) must fit one replica's wasm heap: every weight in float32, 4 GiB at most
 * (checkModelFits; within that, each tensor has under 2^30 elements, so tfjs's 2^31-element limit is
 * never the one hit). Reading a config does not check this, so a config too large to load can still
 * be inspected.
 */
import { existsSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { parameterCount, type ModelConfig } from "./config.js";
import { INDEX_FILE, SINGLE_FILE } from "./safetensors.js";
import { ModelFormatError } from "../util/errors.js";

export const MAX_WEIGHT_BYTES = 4 * 2 ** 30;
const HINT = "pick a smaller model, e.g. one made by agent-r1 init-model --preset small";

/** Throws a one-line ModelFormatError naming the field that makes the model too large for one replica. */
export function checkModelFits(c: ModelConfig, file = "config.json", maxBytes = MAX_WEIGHT_BYTES): void {
  const params = parameterCount(c);
  if (params * 4 <= maxBytes) return;
  const [field, cause] = largestPart(c, params);
  throw new ModelFormatError(
    file,
    field,
    `${cause} make ${count(params)} parameters (${bytes(params * 4)} in float32); this engine holds at most ${bytes(maxBytes, true)} of weights per replica`,
    HINT,
  );
}

/** The field to blame: the vocabulary when the embeddings dominate, else whatever is out of proportion in the layers. */
function largestPart(c: ModelConfig, params: number): [string, string] {
  const h = c.hiddenSize,
    embeddings = c.vocabSize * h * (c.tieWordEmbeddings ? 1 : 2);
  const shape = `${c.numLayers} layers of hidden_size ${h}, intermediate_size ${c.intermediateSize}`;
  if (embeddings >= params - embeddings) return ["vocab_size", `${c.vocabSize} tokens of hidden_size ${h}`];
  if (c.intermediateSize > 8 * h) return ["intermediate_size", shape];
  if (c.numHeads * c.headDim > 4 * h) {
    return [
      c.raw.head_dim != null ? "head_dim" : "num_attention_heads",
      `${c.numHeads} heads of head_dim ${c.headDim} in ${c.numLayers} layers`,
    ];
  }
  // Real models have about h/128 to h/32 layers.
  return [c.numLayers * 16 > h ? "num_hidden_layers" : "hidden_size", shape];
}

/**
 * The weight files on disk must not be larger than config.json allows (every tensor in float32, an
 * untied head and a value head included, plus a little for extra buffers): a small config with
 * 100 GB of shards would otherwise be read into memory before any shape is compared.
 */
export function checkWeightFiles(dir: string, c: ModelConfig): void {
  const allowed = 4 * (parameterCount({ ...c, tieWordEmbeddings: false }) + c.hiddenSize) * 1.01 + 2 ** 20;
  const files = weightFiles(dir);
  const total = files.reduce((s, f) => s + statSync(join(dir, f)).size, 0);
  if (total > allowed) {
    const label = files.length === 1 ? join(dir, files[0]) : join(dir, INDEX_FILE);
    throw new ModelFormatError(
      label,
      undefined,
      `${bytes(total)} of weights on disk, but config.json describes at most ${bytes(allowed)}`,
      "the weights and config.json belong to different models",
    );
  }
}

/** model.safetensors, or the existing shards the index names; malformed indexes are left to the loader to report. */
function weightFiles(dir: string): string[] {
  if (existsSync(join(dir, SINGLE_FILE))) return [SINGLE_FILE];
  try {
    const map =
      (JSON.parse(readFileSync(join(dir, INDEX_FILE), "utf8")) as { weight_map?: Record<string, unknown> })
        .weight_map ?? {};
    const shards = new Set(Object.values(map).filter((f): f is string => typeof f === "string" && !/[/\\]/.test(f)));
    return [...shards].filter((f) => existsSync(join(dir, f)));
  } catch {
    return [];
  }
}

const count = (n: number) => (n < 1e6 ? String(n) : n.toExponential(1).replace("e+", "e"));

function bytes(n: number, binary = false): string {
  const [base, units] = binary
    ? [1024, ["B", "KiB", "MiB", "GiB", "TiB"]]
    : [1000, ["B", "kB", "MB", "GB", "TB", "PB", "EB"]];
  let i = 0;
  for (; n >= base && i < units.length - 1; i++) n /= base;
  return `${Number(n.toPrecision(3))} ${units[i]}`;
}
