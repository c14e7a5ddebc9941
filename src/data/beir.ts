/**
 * A BeIR-style corpus (corpus.jsonl: { _id, title, text } per line, other
 * fields ignored) -> documents for the search index. `_id` may be a string or
 * a number (kept as its decimal string); `title` may be missing (then "").
 */
import { z } from "zod";
import type { SearchDocument } from "./documents.js";
import { parseJsonl, readTextFile } from "./jsonl.js";
import { BadRow, type ReadOptions, type ReadResult } from "./read-result.js";

const recordSchema = z.object({
  _id: z.union([z.string().min(1), z.number()]),
  title: z.string().default(""),
  text: z.string(),
});

export function beirDocument(value: unknown): SearchDocument {
  const r = recordSchema.safeParse(value);
  if (!r.success) throw new BadRow(`${r.error.issues[0].path.join(".") || "record"}: ${r.error.issues[0].message}`);
  return { id: String(r.data._id), title: r.data.title, text: r.data.text };
}

export function loadBeirCorpus(path: string, opts: ReadOptions = {}): ReadResult<SearchDocument> {
  return parseJsonl(readTextFile(path), path, beirDocument, opts);
}
