/**
 * A tokenizer's identity for comparing two models: the SHA-256 of its tokenizer.json content, read
 * as JSON and written back with every object's keys sorted, so that two files that differ only in
 * key order or spacing (one saved by another tool) are the same tokenizer. Array order (merges,
 * added tokens) counts.
 */
import { createHash } from "node:crypto";
import { join } from "node:path";
import { InputError } from "../util/errors.js";
import { readTextInput } from "../util/read-file.js";

/** JSON text with sorted object keys and no spacing. */
function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(",")}]`;
  if (v !== null && typeof v === "object") {
    const keys = Object.keys(v).sort();
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonical((v as Record<string, unknown>)[k])}`).join(",")}}`;
  }
  return JSON.stringify(v);
}

/** The digest (hex) of `dir`/tokenizer.json; an InputError naming the file when it is missing or not JSON. */
export function tokenizerDigest(dir: string): string {
  const file = join(dir, "tokenizer.json");
  const text = readTextInput(file, (words) => new InputError(`${file}: ${words}`));
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new InputError(`${file}: not valid JSON`);
  }
  return createHash("sha256").update(canonical(parsed)).digest("hex");
}
