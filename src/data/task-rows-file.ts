/** Agent-R1 rows from a file, by extension: .parquet or .jsonl. Bad rows: see read-result.ts. */
import { extname } from "node:path";
import { InputError } from "../util/errors.js";
import type { TaskRow } from "../tasks/types.js";
import { readTaskRowsParquet } from "./parquet.js";
import type { ReadOptions, ReadResult } from "./read-result.js";
import { readTaskRowsJsonl } from "./task-rows-jsonl.js";

export async function readTaskRowsFile(path: string, opts: ReadOptions = {}): Promise<ReadResult<TaskRow>> {
  const ext = extname(path).toLowerCase();
  if (ext === ".parquet") return readTaskRowsParquet(path, opts);
  if (ext === ".jsonl") return readTaskRowsJsonl(path, opts);
  throw new InputError(`${path}: unknown data file type '${ext}'; expected .parquet or .jsonl`);
}

/** "skipped 2 bad rows of data.jsonl" for logs (undefined when none were skipped). */
export function skippedRowsNote(path: string, r: ReadResult<unknown>): string | undefined {
  return r.skipped > 0
    ? `skipped ${r.skipped} bad row${r.skipped === 1 ? "" : "s"} of ${path} (kept ${r.rows.length})`
    : undefined;
}
