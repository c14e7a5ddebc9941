/**
 * The GGUF writer (src/model/gguf.ts), read back here by a small reader of the format: header,
 * metadata (sizes, the tokenizer padded to vocab_size), tensor names and dims in llama.cpp's
 * order, offsets on the alignment, and each tensor's bytes (matrices as stored, vectors as
 * float32); a tied head left out; what it cannot write is refused naming the field.
 */
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { openModelDirRaw, readJsonFile } from "../src/model/model-dir.js";
import { GGUF_ALIGNMENT, ggufTensorName, ggufTokenizer, writeGguf } from "../src/model/gguf.js";
import { toFloat32 } from "../src/model/safetensors.js";
import { tempDir } from "./helpers.js";
import { tinyBf16Model } from "./model-fixtures.js";
import { readGguf } from "./gguf-reader.js";

let root: string, dir: string;

before(async () => {
  root = tempDir("agent-r1-gguf-");
  dir = await tinyBf16Model(root, "bf16", 2);
});

after(() => rmSync(root, { recursive: true, force: true }));

test("a bf16 Qwen2 model written as GGUF reads back: metadata, llama.cpp's names and dims, aligned data", () => {
  const raw = openModelDirRaw(dir).load();
  const c = raw.config;
  const tok = ggufTokenizer(readJsonFile(join(dir, "tokenizer.json")), c.vocabSize, raw.tokenizer.eosTokenId);
  const path = join(root, "m.gguf");
  const names = writeGguf(path, c, raw.weights, tok);
  const buf = readFileSync(path);
  const g = readGguf(buf);
  assert.equal(g.version, 3);
  assert.equal(g.meta.get("general.architecture"), "qwen2");
  assert.equal(g.meta.get("qwen2.block_count"), c.numLayers);
  assert.equal(g.meta.get("qwen2.embedding_length"), c.hiddenSize);
  assert.equal(g.meta.get("qwen2.attention.head_count_kv"), c.numKvHeads);
  assert.equal(g.meta.get("qwen2.feed_forward_length"), c.intermediateSize);
  assert.equal(g.meta.get("tokenizer.ggml.add_bos_token"), false);
  const tokens = g.meta.get("tokenizer.ggml.tokens") as string[];
  assert.equal(tokens.length, c.vocabSize, "one token per row of the embedding");
  assert.equal((g.meta.get("tokenizer.ggml.token_type") as number[]).length, c.vocabSize);
  assert.ok((g.meta.get("tokenizer.ggml.merges") as string[]).length > 0);
  assert.equal(g.meta.get("tokenizer.ggml.eos_token_id"), raw.tokenizer.eosTokenId);
  assert.deepEqual(
    g.tensors.map((t) => t.name),
    names,
  );
  assert.ok(c.tieWordEmbeddings && !names.includes("output.weight"), "a tied head is the embedding");
  assert.ok(names.includes("blk.0.attn_q.bias") && names.includes("blk.1.ffn_down.weight"));
  for (const [hf, t] of raw.weights) {
    const name = ggufTensorName(hf)!;
    if (name === "output.weight") continue;
    const info = g.tensors.find((x) => x.name === name)!;
    assert.deepEqual(info.dims, [...t.shape].reverse(), `${name}: dims innermost first`);
    assert.equal(info.offset % GGUF_ALIGNMENT, 0, `${name}: aligned`);
    const start = g.data + info.offset;
    if (t.shape.length === 1) {
      assert.equal(info.type, 0, `${name}: a vector is float32`);
      const got = new Float32Array(buf.buffer.slice(buf.byteOffset + start, buf.byteOffset + start + t.shape[0] * 4));
      assert.deepEqual(got, toFloat32(t), name);
    } else {
      assert.equal(info.type, 30, `${name}: bf16 stays bf16`);
      const n = t.data.byteLength;
      assert.ok(
        buf.subarray(start, start + n).equals(Buffer.from(t.data.buffer, t.data.byteOffset, n)),
        `${name}: the stored bits`,
      );
    }
  }
});

test("GGUF: what the writer cannot write is refused, naming the field", () => {
  const raw = openModelDirRaw(dir).load();
  const tok = ggufTokenizer(readJsonFile(join(dir, "tokenizer.json")), raw.config.vocabSize);
  const llama = { ...raw.config, modelType: "llama" as const };
  assert.throws(
    () => writeGguf(join(root, "x.gguf"), llama, raw.weights, tok),
    /model_type.*qwen2 and qwen3 models, not llama/,
  );
  const odd = new Map(raw.weights);
  odd.set("model.layers.0.mlp.experts.weight", { dtype: "F32", shape: [2], data: new Float32Array(2) });
  assert.throws(() => writeGguf(join(root, "x.gguf"), raw.config, odd, tok), /experts.*no GGUF name/);
  assert.throws(() => ggufTokenizer({ model: { type: "Unigram" } }, 10), /model\.type.*BPE/);
});
