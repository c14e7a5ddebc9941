/**
 * zstd for protobuf request bodies (`Content-Encoding: zstd`, when a Tinker server's client config
 * sets `proto_compress_fwdbwd`), through a WebAssembly build of the reference library (Node 20 has
 * no zstd of its own). Initialized on first use.
 *
 * Decompression is bounded before it starts: the library allocates what a frame header declares
 * (a 32 KB body can declare gigabytes), so the frames are walked here first (RFC 8878: frame
 * headers, block headers, skippable frames), a declared size past the limit is refused, and each
 * frame is given an output buffer no larger than what is left of the limit.
 */
import { compress, decompress, init } from "@bokuweb/zstd-wasm";

let ready: Promise<void> | undefined;
const initOnce = () => (ready ??= init());

/** The body would decompress past the limit (a 413 for a server), told apart from a corrupt frame. */
export class DecompressLimitError extends Error {
  constructor(readonly limit: number) {
    super(`decompresses to more than ${limit} bytes`);
    this.name = "DecompressLimitError";
  }
}

export async function zstdCompress(data: Uint8Array, level = 3): Promise<Uint8Array> {
  await initOnce();
  return compress(data, level);
}

const ZSTD_MAGIC = 0xfd2fb528;
/** Skippable frames: magic 0x184D2A50..0x184D2A5F. */
const SKIPPABLE_MASK = 0xfffffff0;
const SKIPPABLE_MAGIC = 0x184d2a50;
/** The most one compressed block regenerates (Block_Maximum_Size is at most 128 KiB). */
const MAX_BLOCK = 128 << 10;
/** The library's error code for an output buffer too small (-ZSTD_error_dstSize_tooSmall). */
const DST_TOO_SMALL = -70;

/** One zstd frame of a body: where it is, and what it may decompress to. */
interface Frame {
  start: number;
  end: number;
  /** The declared content size, when the header has one. */
  declared?: number;
  /** Bytes its raw and RLE blocks regenerate (a floor). */
  least: number;
  /** What it can regenerate at most (compressed blocks counted at 128 KiB). */
  most: number;
}

/** Throws when `data` is not zstd frames, or would decompress past `maxBytes`; never allocates more. */
export async function zstdDecompress(data: Uint8Array, maxBytes: number): Promise<Uint8Array> {
  const frames = zstdFrames(data, maxBytes);
  await initOnce();
  const parts: Uint8Array[] = [];
  let left = maxBytes;
  for (const f of frames) {
    const part = decompressFrame(data.subarray(f.start, f.end), f, left, maxBytes);
    left -= part.byteLength;
    parts.push(part);
  }
  return parts.length === 1 ? parts[0] : Buffer.concat(parts);
}

/** One frame into a buffer of its declared size, or of at most `left` bytes when it declares none. */
function decompressFrame(bytes: Uint8Array, f: Frame, left: number, maxBytes: number): Uint8Array {
  const capacity = f.declared ?? Math.min(f.most, left);
  try {
    return decompress(bytes, { defaultHeapSize: Math.max(capacity, 1) });
  } catch (e) {
    const code = /code (-?\d+)/.exec((e as Error).message)?.[1];
    if (f.declared === undefined && f.most > left && Number(code) === DST_TOO_SMALL)
      throw new DecompressLimitError(maxBytes);
    throw e;
  }
}

/**
 * The frames of a body, each checked to its end; skippable frames are left out. A DecompressLimitError
 * as soon as the sizes declared (or the raw and RLE blocks seen) pass `maxBytes`.
 */
export function zstdFrames(data: Uint8Array, maxBytes = Infinity): Frame[] {
  if (data.byteLength === 0) throw new Error("the body is empty, not a zstd frame");
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  const frames: Frame[] = [];
  let at = 0,
    left = maxBytes;
  while (at < data.byteLength) {
    need(data, at, 4, "a frame's magic number");
    const magic = view.getUint32(at, true);
    if ((magic & SKIPPABLE_MASK) >>> 0 === SKIPPABLE_MAGIC) {
      need(data, at + 4, 4, "a skippable frame's size");
      const size = view.getUint32(at + 4, true);
      need(data, at + 8, size, "a skippable frame");
      at += 8 + size;
    } else if (magic === ZSTD_MAGIC) {
      const frame = readFrame(data, view, at, left, maxBytes);
      left -= frame.declared ?? frame.least;
      frames.push(frame);
      at = frame.end;
    } else throw new Error(`not a zstd frame at byte ${at} (magic 0x${magic.toString(16)})`);
  }
  return frames;
}

/** One zstd frame from its magic number: the header, then block headers up to the last block. */
function readFrame(data: Uint8Array, view: DataView, start: number, left: number, maxBytes: number): Frame {
  let at = start + 4;
  need(data, at, 1, "a frame header");
  const fhd = data[at++];
  if (fhd & 0x08) throw new Error(`a reserved bit of the frame header at byte ${start + 4} is set`);
  const single = (fhd & 0x20) !== 0;
  const checksum = (fhd & 0x04) !== 0;
  const fcsFlag = fhd >> 6;
  if (!single) at += 1; // Window_Descriptor
  at += [0, 1, 2, 4][fhd & 0x03]; // Dict_ID
  const fcsSize = [single ? 1 : 0, 2, 4, 8][fcsFlag];
  need(data, at, fcsSize, "a frame header");
  let declared: number | undefined;
  if (fcsSize === 1) declared = data[at];
  else if (fcsSize === 2) declared = view.getUint16(at, true) + 256;
  else if (fcsSize === 4) declared = view.getUint32(at, true);
  else if (fcsSize === 8) declared = Number(view.getBigUint64(at, true));
  at += fcsSize;
  if (declared !== undefined && declared > left) throw new DecompressLimitError(maxBytes);
  let least = 0,
    most = 0;
  for (let last = false; !last;) {
    need(data, at, 3, "a block header");
    const header = data[at] | (data[at + 1] << 8) | (data[at + 2] << 16);
    at += 3;
    last = (header & 1) === 1;
    const type = (header >> 1) & 3;
    const size = header >>> 3;
    if (type === 3) throw new Error(`a block at byte ${at - 3} has the reserved type`);
    if (size > MAX_BLOCK) throw new Error(`a block at byte ${at - 3} is larger than 128 KiB`);
    const stored = type === 1 ? 1 : size;
    need(data, at, stored, "a block");
    at += stored;
    if (type === 2) most += MAX_BLOCK;
    else {
      least += size;
      most += size;
      if (declared === undefined && least > left) throw new DecompressLimitError(maxBytes);
    }
  }
  if (checksum) {
    need(data, at, 4, "a frame checksum");
    at += 4;
  }
  return { start, end: at, declared, least, most };
}

function need(data: Uint8Array, at: number, n: number, what: string): void {
  if (at + n > data.byteLength) throw new Error(`the body ends inside ${what} (byte ${at} of ${data.byteLength})`);
}
