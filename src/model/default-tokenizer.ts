/** Location of the tokenizer shipped in assets/tokenizer (works from src/ under tsx and from dist/src/). */
import { join } from "node:path";
import { packageRoot } from "../util/package-root.js";

/** Absolute path of assets/tokenizer (tokenizer.json + tokenizer_config.json). */
export function defaultTokenizerDir(): string {
  return join(packageRoot(), "assets", "tokenizer");
}
