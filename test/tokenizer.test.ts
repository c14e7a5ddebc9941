import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { trainByteLevelBpe } from "../src/model/bpe-trainer.js";
import { IncrementalDecoder, Tokenizer } from "../src/model/tokenizer.js";
import { defaultTokenizerDir } from "../src/model/default-tokenizer.js";
import { DEFAULT_CHAT_TEMPLATE } from "../src/model/chat-template.js";
import { ModelFormatError } from "../src/util/errors.js";

const SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"];
const ADDED = ["<tool_call>", "</tool_call>", "<think>", "</think>"];
const CORPUS = [
  "The agent calls a tool, reads the response and answers.",
  'It\'s 12 * (3 + 4) = 84, isn\'t it? {"name": "calculator", "arguments": {"expression": "12 * (3 + 4)"}}',
  "<|im_start|>user\nWhere is Kalomir?<|im_end|>\n<|im_start|>assistant\n<tool_call>\n{}\n</tool_call><|im_end|>",
  "line one\n\n    indented line\ttab\r\nwindows line",
];
const VOCAB = 360; // the small corpus supports ~380 ids
const json = trainByteLevelBpe(Array(30).fill(CORPUS).flat(), {
  vocabSize: VOCAB,
  specialTokens: SPECIAL,
  addedTokens: ADDED,
});
const config = {
  eos_token: { content: "<|im_end|>", special: true },
  pad_token: "<|endoftext|>",
  bos_token: null,
  chat_template: "{{ x }}",
};
const tok = Tokenizer.fromObjects(json, config);

test("encode/decode round-trips text exactly, incl. unicode, emoji, digits, JSON, whitespace", () => {
  const samples = [
    "The agent calls a tool.",
    "Ünïcödé: naïve café, 日本語のテキスト, Ελληνικά, עברית",
    "emoji 😀👍🏽 family 👨‍👩‍👧 flag 🇫🇷",
    "digits 1234567890 and 3.14159e-10",
    '{"name": "search", "arguments": {"query": "what is 2+2?"}}',
    "  leading spaces\n\n\ttabs\r\nand trailing   ",
    " ok . , ! ? don't 's",
    "",
  ];
  for (const s of samples) assert.equal(tok.decode(tok.encode(s)), s, JSON.stringify(s));
});

test("special and added tokens encode to single ids; skipSpecialTokens drops only special ones", () => {
  const end = tok.tokenToId("<|im_end|>");
  const call = tok.tokenToId("<tool_call>");
  assert.ok(end !== undefined && call !== undefined);
  assert.deepEqual(tok.encode("<|im_end|>"), [end]);
  assert.deepEqual(tok.encode("<tool_call>"), [call]);
  assert.equal(tok.idToToken(call), "<tool_call>");
  assert.ok(tok.specialTokenIds.has(end));
  assert.ok(!tok.specialTokenIds.has(call));
  assert.equal(tok.specialTokenIds.size, 3);

  const ids = tok.encode("<|im_start|>assistant\n<tool_call>{}</tool_call><|im_end|>");
  assert.equal(ids.filter((id) => id === end).length, 1);
  assert.equal(tok.decode(ids, { skipSpecialTokens: true }), "assistant\n<tool_call>{}</tool_call>");
  assert.equal(tok.decode(ids), "<|im_start|>assistant\n<tool_call>{}</tool_call><|im_end|>");
});

test("config lookups: eos (object form), pad, bos, vocabSize, chat template", () => {
  assert.equal(tok.eosToken, "<|im_end|>");
  assert.equal(tok.eosTokenId, tok.tokenToId("<|im_end|>"));
  assert.equal(tok.padTokenId, tok.tokenToId("<|endoftext|>"));
  assert.equal(tok.bosToken, undefined);
  assert.equal(tok.vocabSize, VOCAB);
  assert.equal(tok.chatTemplate, "{{ x }}");
  assert.deepEqual(tok.encode("hi", { addSpecialTokens: false }), tok.encode("hi"));

  const list = Tokenizer.fromObjects(json, {
    chat_template: [
      { name: "tool_use", template: "T" },
      { name: "default", template: "D" },
    ],
  });
  assert.equal(list.chatTemplate, "D");
  // no eos_token in the config: fall back to <|im_end|>
  assert.equal(list.eosToken, "<|im_end|>");
  assert.equal(Tokenizer.fromObjects(json, {}).chatTemplate, undefined);
});

test("decode of an empty list or unknown ids gives empty text", () => {
  assert.equal(tok.decode([]), "");
  assert.equal(tok.decode([99999]), "");
});

test("unsupported model type names the file and model.type", () => {
  const wordLevel = { model: { type: "WordLevel", vocab: { a: 0, "[UNK]": 1 }, unk_token: "[UNK]" }, added_tokens: [] };
  assert.throws(
    () => Tokenizer.fromObjects(wordLevel, {}),
    (e: unknown) =>
      e instanceof ModelFormatError &&
      e.file === "tokenizer.json" &&
      e.field === "model.type" &&
      e.message === "tokenizer.json (model.type): unsupported tokenizer model 'WordLevel'; supported: BPE",
  );
  const dir = mkdtempSync(join(tmpdir(), "agent-r1-tok-"));
  try {
    writeFileSync(
      join(dir, "tokenizer.json"),
      JSON.stringify({ ...wordLevel, model: { ...wordLevel.model, type: "Unigram" } }),
    );
    assert.throws(
      () => Tokenizer.fromDir(dir),
      (e: unknown) =>
        e instanceof ModelFormatError &&
        e.message.startsWith(join(dir, "tokenizer.json") + " (model.type): unsupported tokenizer model 'Unigram'"),
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("missing file and invalid JSON errors name the file", () => {
  const dir = mkdtempSync(join(tmpdir(), "agent-r1-tok-"));
  try {
    assert.throws(
      () => Tokenizer.fromDir(dir),
      (e: unknown) =>
        e instanceof ModelFormatError && e.file === join(dir, "tokenizer.json") && /not found/.test(e.message),
    );
    writeFileSync(join(dir, "tokenizer.json"), JSON.stringify(json));
    writeFileSync(join(dir, "tokenizer_config.json"), "{ not json");
    assert.throws(
      () => Tokenizer.fromDir(dir),
      (e: unknown) =>
        e instanceof ModelFormatError &&
        e.file === join(dir, "tokenizer_config.json") &&
        /invalid JSON/.test(e.message),
    );
    writeFileSync(join(dir, "tokenizer_config.json"), JSON.stringify({ eos_token: "<|im_end|>" }));
    writeFileSync(join(dir, "chat_template.jinja"), "J");
    const t = Tokenizer.fromDir(dir);
    assert.equal(t.chatTemplate, "J");
    assert.equal(Tokenizer.fromFiles(join(dir, "tokenizer.json")).vocabSize, VOCAB);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("IncrementalDecoder holds back a multi-byte character split across tokens", () => {
  const ids = tok.encode("é"); // not in the corpus: two byte tokens 0xC3 0xA9
  assert.equal(ids.length, 2);
  const dec = new IncrementalDecoder(tok);
  assert.equal(dec.push(ids[0]), "");
  assert.equal(dec.push(ids[1]), "é");

  const text = "Hi 😀 日本 <tool_call>x</tool_call><|im_end|>";
  const all = tok.encode(text);
  const d2 = new IncrementalDecoder(tok);
  const pieces = all.map((id) => d2.push(id));
  assert.ok(pieces.includes(""), "emoji bytes arrive over several tokens");
  assert.equal(pieces.join("") + d2.flush(), text);
  assert.equal(d2.text, text);
  assert.ok(pieces.every((p) => !p.includes("\uFFFD")));

  const d3 = new IncrementalDecoder(tok, { skipSpecialTokens: true });
  assert.equal(d3.pushAll(all), "Hi 😀 日本 <tool_call>x</tool_call>");
  const d4 = new IncrementalDecoder(tok);
  d4.push(ids[0]);
  assert.equal(d4.flush(), "\uFFFD");
});

test("the shipped default tokenizer loads", () => {
  const def = Tokenizer.fromDir(defaultTokenizerDir());
  assert.equal(def.vocabSize, 1024);
  assert.equal(def.eosToken, "<|im_end|>");
  assert.equal(def.eosTokenId, def.tokenToId("<|im_end|>"));
  assert.equal(def.padTokenId, def.tokenToId("<|endoftext|>"));
  assert.equal(def.bosToken, undefined);
  assert.equal(def.chatTemplate, DEFAULT_CHAT_TEMPLATE);
  for (const t of [
    "<tool_call>",
    "</tool_call>",
    "<tool_response>",
    "</tool_response>",
    "<think>",
    "</think>",
    "<answer>",
    "</answer>",
  ]) {
    assert.equal(def.encode(t).length, 1, t);
    assert.ok(!def.specialTokenIds.has(def.tokenToId(t) as number));
  }
  assert.equal(def.specialTokenIds.size, 3);
  const s =
    '<|im_start|>user\nWhat is 12 * (3 + 4)?<|im_end|>\n{"name": "calculator", "arguments": {"expression": "12 * (3 + 4)"}} ✓';
  assert.equal(def.decode(def.encode(s)), s);
});
