/**
 * Bad rows: by default the first one is an InputError naming the file and the
 * row ("data.jsonl: line 7: ..."); with `skipBadRows` they are skipped and
 * counted. Line and row numbers count from 1.
 */
import { InputError } from "../util/errors.js";

export interface ReadOptions {
  skipBadRows?: boolean;
}

export interface ReadResult<T> {
  rows: T[];
  /** Bad rows skipped (always 0 without skipBadRows: the first one throws). */
  skipped: number;
}

/** Thrown by a row converter: what is wrong with the row, without the file and row number. */
export class BadRow extends Error {}

export function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/**
 * Converts raw items ([number, value] with the 1-based position) into rows.
 * The converter throws BadRow (or InputError) for a bad row; anything else is a bug and propagates.
 */
export function collectRows<R, T>(
  file: string,
  unit: "line" | "row" | "record",
  items: Iterable<[number, R]>,
  convert: (raw: R, kept: number) => T,
  opts: ReadOptions = {},
): ReadResult<T> {
  const rows: T[] = [];
  let skipped = 0;
  for (const [n, raw] of items) {
    try {
      rows.push(convert(raw, rows.length));
    } catch (err) {
      if (!(err instanceof BadRow || err instanceof InputError)) throw err;
      if (!opts.skipBadRows)
        throw new InputError(
          `${file}: ${unit} ${n}: ${err.message}`,
          "fix the row, or skip and count bad rows: --skip-bad-rows on the command line, skipBadRows in code",
        );
      skipped++;
    }
  }
  return { rows, skipped };
}
