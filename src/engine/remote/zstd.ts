/**
 * zstd for protobuf request bodies (`Content-Encoding: zstd`, when a Tinker server's client config
 * sets `proto_compress_fwdbwd`), through a WebAssembly build of the reference library (Node 20 has
 * no zstd of its own). Initialized on first use.
 */
import { compress, decompress, init } from "@bokuweb/zstd-wasm";

let ready: Promise<void> | undefined;
const initOnce = () => (ready ??= init());

export async function zstdCompress(data: Uint8Array, level = 3): Promise<Uint8Array> {
  await initOnce();
  return compress(data, level);
}

/** Throws when `data` is not a zstd frame, or would decompress past `maxBytes`. */
export async function zstdDecompress(data: Uint8Array, maxBytes: number): Promise<Uint8Array> {
  await initOnce();
  const out = decompress(data);
  if (out.byteLength > maxBytes) throw new Error(`decompresses to more than ${maxBytes} bytes`);
  return out;
}
