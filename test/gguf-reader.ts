/** A small reader of GGUF v3 for the tests: header, metadata, tensor infos, and where the data starts. */
import assert from "node:assert/strict";
import { GGUF_ALIGNMENT } from "../src/model/gguf.js";

export type Value = number | bigint | boolean | string | Value[];

/** GGUF v3 as the format describes it (little-endian; strings and counts u64). */
export function readGguf(buf: Buffer) {
  let at = 0;
  const u32 = () => ((at += 4), buf.readUInt32LE(at - 4));
  const u64 = () => ((at += 8), Number(buf.readBigUInt64LE(at - 8)));
  const str = () => {
    const n = u64();
    at += n;
    return buf.toString("utf8", at - n, at);
  };
  const value = (type: number): Value => {
    switch (type) {
      case 4:
        return u32();
      case 5:
        return ((at += 4), buf.readInt32LE(at - 4));
      case 6:
        return ((at += 4), buf.readFloatLE(at - 4));
      case 7:
        return ((at += 1), buf[at - 1] === 1);
      case 8:
        return str();
      case 9: {
        const t = u32(),
          n = u64();
        return Array.from({ length: n }, () => value(t));
      }
      default:
        throw new Error(`value type ${type}`);
    }
  };
  assert.equal(buf.toString("latin1", 0, 4), "GGUF");
  at = 4;
  const version = u32(),
    nTensors = u64(),
    nKv = u64();
  const meta = new Map<string, Value>();
  for (let i = 0; i < nKv; i++) {
    const key = str();
    meta.set(key, value(u32()));
  }
  const tensors = Array.from({ length: nTensors }, () => {
    const name = str();
    const dims = Array.from({ length: u32() }, () => u64());
    return { name, dims, type: u32(), offset: u64() };
  });
  const data = at + ((GGUF_ALIGNMENT - (at % GGUF_ALIGNMENT)) % GGUF_ALIGNMENT);
  return { version, meta, tensors, data };
}
