/** TaskRows as Agent-R1 parquet (layout: parquet-layout.ts), read with hyparquet and written with hyparquet-writer. */
import { asyncBufferFromFile, parquetMetadataAsync, parquetReadObjects } from "hyparquet";
import { parquetWriteBuffer } from "hyparquet-writer";
import { InputError } from "../util/errors.js";
import { writeFileAtomic } from "../util/atomic-write.js";
import { fileProblem } from "../util/read-file.js";
import type { TaskRow } from "../tasks/types.js";
import { JSON_FIELDS_KEY, layoutRows, unlayoutRow } from "./parquet-layout.js";
import { collectRows, messageOf, type ReadOptions, type ReadResult } from "./read-result.js";
import { checkTaskRow } from "./row-schema.js";

export function writeTaskRowsParquet(path: string, rows: readonly TaskRow[]): void {
  rows.forEach((r, i) => {
    try {
      checkTaskRow(r);
    } catch (err) {
      throw new InputError(
        `${path}: row ${i + 1}: ${messageOf(err)}`,
        "only TaskRows (src/tasks/types.ts) are written",
      );
    }
  });
  let buffer: ArrayBuffer;
  try {
    buffer = parquetWriteBuffer({ ...layoutRows(rows), statistics: false });
  } catch (err) {
    if (err instanceof InputError) throw new InputError(`${path}: ${err.message}`, err.hint);
    throw err;
  }
  writeFileAtomic(path, new Uint8Array(buffer));
}

export async function readTaskRowsParquet(path: string, opts: ReadOptions = {}): Promise<ReadResult<TaskRow>> {
  let records: Record<string, unknown>[];
  let jsonFields: string[] = [];
  const problem = fileProblem(path);
  if (problem) throw new InputError(`${path}: ${problem}`);
  try {
    const file = await asyncBufferFromFile(path);
    const meta = await parquetMetadataAsync(file);
    const listed = meta.key_value_metadata?.find((kv) => kv.key === JSON_FIELDS_KEY)?.value;
    if (listed) jsonFields = JSON.parse(listed) as string[];
    records = await parquetReadObjects({ file, metadata: meta });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new InputError(
      `${path}: ${code === "ENOENT" ? "file not found" : `cannot read as parquet: ${messageOf(err)}`}`,
    );
  }
  const items = records.map((r, i): [number, Record<string, unknown>] => [i + 1, r]);
  return collectRows(path, "row", items, (raw) => checkTaskRow(unlayoutRow(raw, jsonFields)), opts);
}
