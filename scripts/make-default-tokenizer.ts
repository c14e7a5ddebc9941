/**
 * Builds assets/tokenizer/{tokenizer.json,tokenizer_config.json}: a 1024-id byte-level BPE
 * trained on a synthetic, seeded corpus (no downloads). Re-running gives identical files.
 *   node --import tsx scripts/make-default-tokenizer.ts
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { trainByteLevelBpe } from "../src/model/bpe-trainer.js";
import {
  DEFAULT_CHAT_TEMPLATE,
  renderChatTemplate,
  type ChatMessage,
  type ToolSchema,
} from "../src/model/chat-template.js";
import { defaultTokenizerDir } from "../src/model/default-tokenizer.js";
import { Tokenizer } from "../src/model/tokenizer.js";

const VOCAB_SIZE = 1024;
const SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"];
const ADDED = [
  "<tool_call>",
  "</tool_call>",
  "<tool_response>",
  "</tool_response>",
  "<think>",
  "</think>",
  "<answer>",
  "</answer>",
];
const DOCS = 12000;

/** mulberry32: small seeded PRNG in [0, 1). */
function prng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const rand = prng(20240601);
const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)];
const int = (lo: number, hi: number): number => lo + Math.floor(rand() * (hi - lo + 1));

// Made-up entities so the vocabulary is not tied to real-world facts.
const syl = [
  "ka",
  "lo",
  "mi",
  "ren",
  "tor",
  "va",
  "zel",
  "qu",
  "bar",
  "nim",
  "sha",
  "dor",
  "el",
  "fin",
  "gra",
  "hul",
  "an",
  "bo",
  "cy",
  "de",
  "ess",
  "fa",
  "gu",
  "ix",
  "jo",
  "kel",
  "lum",
  "mor",
  "ny",
  "ost",
  "pe",
  "ri",
  "sol",
  "tan",
  "ul",
  "vin",
  "wex",
  "yo",
  "zu",
  "ar",
];
const name = (): string => {
  const n = Array.from({ length: int(2, 4) }, () => pick(syl)).join("");
  return n[0].toUpperCase() + n.slice(1);
};
const kinds = ["city", "river", "company", "planet", "scientist", "mountain", "festival", "book", "island", "language"];
const verbs = ["founded", "discovered", "built", "named", "visited", "described", "measured", "crossed"];
const props = ["population", "length", "height", "age", "capital", "founder", "area", "author"];
const items = ["apples", "books", "coins", "marbles", "tickets", "boxes", "pencils", "stamps"];
const people = ["Alice", "Bob", "Carol", "Dave", "Erin", "Frank", "Grace", "Heidi"];
const ops = ["+", "-", "*", "/"];

function sentence(): string {
  const a = name(),
    b = name(),
    k = pick(kinds);
  return pick([
    `${a} is a ${k} that was ${pick(verbs)} by ${b} in ${int(1200, 2023)}.`,
    `The ${pick(props)} of the ${k} ${a} is ${int(2, 99999)}.`,
    `According to the records, ${a} and ${b} are both ${k.endsWith("y") ? k.slice(0, -1) + "ies" : k + "s"}, but ${a} is older.`,
    `In ${int(1500, 2020)}, ${b} wrote that the ${k} ${a} was "${pick(["beautiful", "remote", "ancient", "famous"])}".`,
    `It's said that ${a}'s ${pick(props)} doesn't change; they've checked it ${int(2, 12)} times.`,
  ]);
}

function question(): string {
  const a = name();
  return pick([
    `What is the ${pick(props)} of ${a}?`,
    `Who ${pick(verbs)} the ${pick(kinds)} called ${a}?`,
    `In which year was ${a} ${pick(verbs)}?`,
    `Which ${pick(kinds)} is larger: ${a} or ${name()}?`,
  ]);
}

function arithmetic(): { q: string; expr: string; ans: string } {
  const p = pick(people),
    x = int(2, 60),
    y = int(2, 30),
    z = int(1, 9),
    it = pick(items);
  const v = pick([
    {
      q: `${p} has ${x} ${it} and buys ${y} more. How many ${it} does ${p} have now?`,
      expr: `${x} + ${y}`,
      ans: String(x + y),
    },
    { q: `${p} had ${x + y} ${it} and gave away ${y}. How many are left?`, expr: `${x + y} - ${y}`, ans: String(x) },
    {
      q: `There are ${x} boxes with ${y} ${it} each. How many ${it} are there in total?`,
      expr: `${x} * ${y}`,
      ans: String(x * y),
    },
    {
      q: `${p} packs ${x * z} ${it} into ${z} equal bags. How many go in each bag?`,
      expr: `${x * z} / ${z}`,
      ans: String(x),
    },
    { q: `Compute ${x} * (${y} + ${z}).`, expr: `${x} * (${y} + ${z})`, ans: String(x * (y + z)) },
  ]);
  return v;
}

const TOOLS: ToolSchema[] = [
  {
    type: "function",
    function: {
      name: "search",
      description: "Search a knowledge base and return the top passages.",
      parameters: {
        type: "object",
        properties: { query: { type: "string", description: "The search query." } },
        required: ["query"],
      },
    },
  },
  {
    type: "function",
    function: {
      name: "calculator",
      description: "Evaluate an arithmetic expression.",
      parameters: {
        type: "object",
        properties: { expression: { type: "string", description: "e.g. 12 * (3 + 4)" } },
        required: ["expression"],
      },
    },
  },
];

function dialog(): string {
  const useTools = rand() < 0.7;
  const msgs: ChatMessage[] = [];
  if (rand() < 0.5)
    msgs.push({
      role: "system",
      content: pick(["You are a helpful assistant.", "You are a careful research agent. Think step by step."]),
    });
  if (rand() < 0.5) {
    const a = arithmetic();
    msgs.push({ role: "user", content: a.q });
    if (useTools) {
      msgs.push({
        role: "assistant",
        content: `<think>\nI should compute ${a.expr}.\n</think>`,
        tool_calls: [{ type: "function", function: { name: "calculator", arguments: { expression: a.expr } } }],
      });
      msgs.push({ role: "tool", content: a.ans });
    }
    msgs.push({ role: "assistant", content: `<think>\n${a.expr} = ${a.ans}\n</think>\n<answer>${a.ans}</answer>` });
  } else {
    const q = question(),
      n = name();
    msgs.push({ role: "user", content: q });
    if (useTools) {
      msgs.push({
        role: "assistant",
        content: "",
        tool_calls: [{ function: { name: "search", arguments: { query: q.replace(/\?$/, "") } } }],
      });
      const k = int(1, 2);
      for (let i = 0; i < k; i++) msgs.push({ role: "tool", content: `${sentence()} ${sentence()}` });
    }
    msgs.push({ role: "assistant", content: `<think>\nThe passages mention ${n}.\n</think>\n<answer>${n}</answer>` });
  }
  return (
    renderChatTemplate(DEFAULT_CHAT_TEMPLATE, { messages: msgs, tools: useTools ? TOOLS : undefined }) + "<|endoftext|>"
  );
}

/** Same spacing as the chat template's tojson: `{"a": 1, "b": 2}`. */
function toolCallJson(): string {
  if (rand() < 0.5) return `{"name": "search", "arguments": {"query": ${JSON.stringify(question())}}}`;
  return `{"name": "calculator", "arguments": {"expression": "${arithmetic().expr}"}}`;
}

function document(): string {
  const r = rand();
  if (r < 0.3) return Array.from({ length: int(1, 4) }, sentence).join(" ");
  if (r < 0.4) return `Q: ${question()}\nA: ${name()}.`;
  if (r < 0.55) {
    const a = arithmetic();
    return `${a.q}\nAnswer: ${a.expr} = ${a.ans}`;
  }
  if (r < 0.65) return `<tool_call>\n${toolCallJson()}\n</tool_call>`;
  return dialog();
}

const corpus = Array.from({ length: DOCS }, document);
const json = trainByteLevelBpe(corpus, {
  vocabSize: VOCAB_SIZE,
  specialTokens: SPECIAL,
  addedTokens: ADDED,
  minFrequency: 2,
}) as {
  added_tokens: { id: number; content: string; special: boolean }[];
};

const addedDecoder: Record<string, object> = {};
for (const t of json.added_tokens) {
  addedDecoder[String(t.id)] = {
    content: t.content,
    lstrip: false,
    normalized: false,
    rstrip: false,
    single_word: false,
    special: t.special,
  };
}
const config = {
  add_bos_token: false,
  add_prefix_space: false,
  added_tokens_decoder: addedDecoder,
  additional_special_tokens: ["<|im_start|>", "<|im_end|>"],
  bos_token: null,
  chat_template: DEFAULT_CHAT_TEMPLATE,
  clean_up_tokenization_spaces: false,
  eos_token: "<|im_end|>",
  errors: "replace",
  model_max_length: 4096,
  pad_token: "<|endoftext|>",
  split_special_tokens: false,
  tokenizer_class: "PreTrainedTokenizerFast",
  unk_token: null,
};

const dir = defaultTokenizerDir();
mkdirSync(dir, { recursive: true });
writeFileSync(join(dir, "tokenizer.json"), JSON.stringify(json, null, 2) + "\n");
writeFileSync(join(dir, "tokenizer_config.json"), JSON.stringify(config, null, 2) + "\n");

const tok = Tokenizer.fromDir(dir);
if (tok.vocabSize !== VOCAB_SIZE)
  throw new Error(`expected vocab ${VOCAB_SIZE}, got ${tok.vocabSize}; enlarge the corpus`);
const sample = corpus[corpus.length - 1];
const ids = tok.encode(sample);
if (tok.decode(ids) !== sample) throw new Error("round trip failed on the training sample");
console.log(
  `wrote ${dir}: vocab ${tok.vocabSize}, eos ${tok.eosToken}=${tok.eosTokenId}, sample ${sample.length} chars -> ${ids.length} tokens`,
);
