/** TaskRows as JSON Lines: one row per line, exactly the TaskRow object (the round trip is exact). */
import { InputError } from "../util/errors.js";
import type { TaskRow } from "../tasks/types.js";
import { parseJsonl, readTextFile, writeJsonl } from "./jsonl.js";
import type { ReadOptions, ReadResult } from "./read-result.js";
import { checkTaskRow } from "./row-schema.js";

export function readTaskRowsJsonl(path: string, opts: ReadOptions = {}): ReadResult<TaskRow> {
  return parseJsonl(readTextFile(path), path, (v) => checkTaskRow(v), opts);
}

export function writeTaskRowsJsonl(path: string, rows: readonly TaskRow[]): void {
  rows.forEach((r, i) => {
    try {
      checkTaskRow(r);
    } catch (err) {
      throw new InputError(
        `${path}: row ${i + 1}: ${(err as Error).message}`,
        "only TaskRows (src/tasks/types.ts) are written",
      );
    }
  });
  writeJsonl(path, rows);
}
