/** Location of the tokenizer shipped in assets/tokenizer (works from src/ under tsx and from dist/src/). */
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

let cached: string | undefined;

/** Nearest ancestor of this module containing package.json. */
function packageRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    if (existsSync(join(dir, "package.json"))) return dir;
    const parent = dirname(dir);
    if (parent === dir) throw new Error(`package.json not found above ${fileURLToPath(import.meta.url)}`);
    dir = parent;
  }
}

/** Absolute path of assets/tokenizer (tokenizer.json + tokenizer_config.json). */
export function defaultTokenizerDir(): string {
  cached ??= join(packageRoot(), "assets", "tokenizer");
  return cached;
}
