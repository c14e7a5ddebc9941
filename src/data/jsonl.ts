/** JSON Lines: one JSON value per line; blank lines are ignored. Errors name the file and the line. */
import { InputError } from "../util/errors.js";
import { writeFileAtomic } from "../util/atomic-write.js";
import { readTextInput } from "../util/read-file.js";
import { BadRow, collectRows, messageOf, type ReadOptions, type ReadResult } from "./read-result.js";

export function readTextFile(path: string): string {
  return readTextInput(path, (words) => new InputError(`${path}: ${words}`));
}

/** Non-blank lines with their 1-based line numbers. */
function* lines(text: string): Generator<[number, string]> {
  const all = text.split("\n");
  for (let i = 0; i < all.length; i++) {
    const line = all[i].replace(/\r$/, "");
    if (line.trim() !== "") yield [i + 1, line];
  }
}

/** Parses JSONL text; `convert` turns each value into a row (throwing BadRow for a bad one). */
export function parseJsonl<T>(
  text: string,
  file: string,
  convert: (value: unknown, kept: number) => T,
  opts: ReadOptions = {},
): ReadResult<T> {
  return collectRows(
    file,
    "line",
    lines(text),
    (line, kept) => {
      let value: unknown;
      try {
        value = JSON.parse(line);
      } catch (err) {
        throw new BadRow(`invalid JSON: ${messageOf(err)}`);
      }
      return convert(value, kept);
    },
    opts,
  );
}

export function readJsonl(path: string, opts: ReadOptions = {}): ReadResult<unknown> {
  return parseJsonl(readTextFile(path), path, (v) => v, opts);
}

/** One compact JSON value per line; creates the directory. Values JSON cannot hold exactly are refused. */
export function writeJsonl(path: string, rows: readonly unknown[]): void {
  const out = rows.map((r, i) => {
    let line: string | undefined;
    try {
      line = JSON.stringify(r);
    } catch (err) {
      throw new InputError(`${path}: row ${i + 1}: cannot be written as JSON: ${messageOf(err)}`);
    }
    if (line === undefined) throw new InputError(`${path}: row ${i + 1}: ${typeof r} cannot be written as JSON`);
    return line;
  });
  writeFileAtomic(path, out.length ? `${out.join("\n")}\n` : "");
}
