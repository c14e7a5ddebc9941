/** Shared setup of the fused-kernel experiments: the S and M model directories bench/engine.ts builds, and its batches. */
import { mkdirSync, writeFileSync, existsSync } from "node:fs";
import { join } from "node:path";
import { trainByteLevelBpe } from "../../src/model/bpe-trainer.js";
import { DEFAULT_CHAT_TEMPLATE } from "../../src/model/chat-template.js";
import { initModel } from "../../src/model/init-model.js";
import { Rng } from "../../src/util/rng.js";
import type { Datum } from "../../src/engine/types.js";

export const SHAPES = { S: { preset: "small" as const, vocab: 512 }, M: { preset: "medium" as const, vocab: 2048 } };

/** WORK/S or WORK/M, made on the first call (a random model over a BPE tokenizer of made-up words) and reused after. */
export async function modelDir(work: string, name: "S" | "M"): Promise<string> {
  const shape = SHAPES[name];
  const dir = join(work, name);
  if (existsSync(join(dir, "model.safetensors"))) return dir;
  const tokDir = join(work, `tok-${name}`);
  const rng = new Rng(1);
  const words = Array.from({ length: 3000 }, () =>
    Array.from({ length: 2 + rng.int(6) }, () => "abcdefghijklmnopqrstuvwxyz"[rng.int(26)]).join(""),
  );
  const corpus = Array.from(
    { length: 2000 },
    () => Array.from({ length: 12 }, () => words[rng.int(words.length)]).join(" ") + ` ${rng.int(1000)}.`,
  );
  const tok = trainByteLevelBpe(corpus, {
    vocabSize: Math.min(shape.vocab, 512),
    specialTokens: ["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
  });
  mkdirSync(tokDir, { recursive: true });
  writeFileSync(join(tokDir, "tokenizer.json"), JSON.stringify(tok));
  writeFileSync(
    join(tokDir, "tokenizer_config.json"),
    JSON.stringify({ eos_token: "<|im_end|>", pad_token: "<|endoftext|>", chat_template: DEFAULT_CHAT_TEMPLATE }),
  );
  await initModel({ preset: shape.preset, out: dir, tokenizer: tokDir, overrides: { vocab_size: shape.vocab } });
  return dir;
}

const randomTokens = (rng: Rng, n: number, vocab: number) => Array.from({ length: n }, () => 3 + rng.int(vocab - 3));

/** `n` datums of 256 random tokens with random advantages (the bench's training batch). */
export function trainDatums(vocab: number, n = 16): Datum[] {
  const rng = new Rng(7);
  return Array.from({ length: n }, () => {
    const seq = randomTokens(rng, 257, vocab);
    const targets = seq.slice(1);
    return {
      tokens: seq.slice(0, -1),
      targetTokens: targets,
      weights: targets.map(() => 1),
      advantages: targets.map(() => rng.normal()),
      logprobs: targets.map(() => -Math.log(vocab)),
    };
  });
}

/** `n` prompts of 64 random tokens (the bench's sampling batch). */
export function prompts(vocab: number, n = 32): number[][] {
  const rng = new Rng(8);
  return Array.from({ length: n }, () => randomTokens(rng, 64, vocab));
}
