/**
 * Follows a JSON-lines file that another process appends to (the trainer's metrics.jsonl).
 *
 * Each `refresh()` reads only the bytes added since the last one. A last line without its
 * newline is held back until it is complete, unless it already parses as a whole JSON object
 * (a strict prefix of an object's text never does), so a file that ends without a newline
 * still shows its last record. When the file is replaced, shrinks, or its already-read bytes
 * change (a resumed run rewrites metrics.jsonl without the iterations after its checkpoint),
 * everything is read again and `generation` goes up, so readers know to start over.
 * With `within`, the file is read only while it is a regular file inside that directory
 * (symlinks resolved); otherwise it counts as absent. Lines that are not JSON objects, or
 * nest too deep to serve again (json-line.ts), are counted as skipped.
 */
import { closeSync, constants, openSync, readSync, statSync } from "node:fs";
import { parseJsonObject } from "./json-line.js";
import { runFile } from "./run-files.js";

export type JsonRecord = Record<string, unknown>;

/** How many already-read bytes are compared on each refresh to notice a rewritten file. */
const FINGERPRINT_BYTES = 256;
const NEWLINE = 0x0a;

export class JsonlTail {
  private recordList: JsonRecord[] = [];
  /** Bytes consumed into records (always at a line boundary or after an accepted last line). */
  private consumed = 0;
  /** Bytes after `consumed` that do not yet form a complete line. */
  private pending: Buffer = Buffer.alloc(0);
  /** The last consumed bytes, to notice a rewrite that kept or grew the size. */
  private fingerprint: Buffer = Buffer.alloc(0);
  private inode = -1;
  private gen = 0;
  private bad = 0;

  constructor(
    readonly file: string,
    private readonly opts: { within?: string } = {},
  ) {}

  /** Bumped whenever the file had to be read from the start again. */
  get generation(): number {
    return this.gen;
  }

  /** Complete lines that were not a JSON object (skipped). */
  get skipped(): number {
    return this.bad;
  }

  get records(): readonly JsonRecord[] {
    return this.recordList;
  }

  /** Reads what was appended since the last call; returns how many records are new (all of them after a reset). */
  refresh(): number {
    const path = this.opts.within === undefined ? this.file : runFile(this.opts.within, this.file);
    const st = path === undefined ? undefined : statIfPresent(path);
    if (path === undefined || st === undefined) {
      if (this.inode !== -1) {
        this.reset();
        this.inode = -1;
      }
      return 0;
    }
    const { size, ino: inode } = st;
    const startGen = this.gen;
    const before = this.recordList.length;
    if (inode !== this.inode || size < this.consumed + this.pending.length) {
      if (this.inode !== -1) this.reset();
      this.inode = inode;
    }
    if (size === this.consumed + this.pending.length) return this.gen === startGen ? 0 : this.recordList.length;
    const start = this.consumed - this.fingerprint.length;
    const data = readRange(path, start, size, this.opts.within !== undefined);
    if (!data.subarray(0, this.fingerprint.length).equals(this.fingerprint)) {
      // The bytes already read changed: the file was rewritten in place.
      this.reset();
      this.refresh();
      return this.recordList.length;
    }
    const rest = data.subarray(this.fingerprint.length);
    let lineStart = 0;
    for (let i = this.pending.length; i < rest.length; i++) {
      if (rest[i] !== NEWLINE) continue;
      this.addLine(rest.subarray(lineStart, i));
      lineStart = i + 1;
    }
    this.consumed += lineStart;
    this.pending = Buffer.from(rest.subarray(lineStart));
    if (this.pending.length > 0) {
      const obj = parseObject(this.pending);
      if (obj) {
        this.recordList.push(obj);
        this.consumed += this.pending.length;
        this.pending = Buffer.alloc(0);
      }
    }
    const fpLen = Math.min(FINGERPRINT_BYTES, this.consumed);
    this.fingerprint = Buffer.from(data.subarray(this.consumed - fpLen - start, this.consumed - start));
    return this.gen === startGen ? this.recordList.length - before : this.recordList.length;
  }

  private addLine(bytes: Buffer): void {
    if (bytes.toString("utf8").trim() === "") return;
    const obj = parseObject(bytes);
    if (obj) this.recordList.push(obj);
    else this.bad++;
  }

  private reset(): void {
    this.recordList = [];
    this.consumed = 0;
    this.pending = Buffer.alloc(0);
    this.fingerprint = Buffer.alloc(0);
    this.bad = 0;
    this.gen++;
  }
}

function statIfPresent(path: string): { size: number; ino: number } | undefined {
  try {
    return statSync(path);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw e;
  }
}

function parseObject(bytes: Buffer): JsonRecord | undefined {
  return parseJsonObject(bytes.toString("utf8"));
}

/** The bytes of [start, end) (fewer if the file is shorter by now); `noFollow` refuses a symlink swapped in since it was resolved. */
function readRange(file: string, start: number, end: number, noFollow: boolean): Buffer {
  const buf = Buffer.alloc(end - start);
  const fd = openSync(file, noFollow ? constants.O_RDONLY | constants.O_NOFOLLOW : constants.O_RDONLY);
  try {
    let got = 0;
    while (got < buf.length) {
      const n = readSync(fd, buf, got, buf.length - got, start + got);
      if (n === 0) break;
      got += n;
    }
    return buf.subarray(0, got);
  } finally {
    closeSync(fd);
  }
}
