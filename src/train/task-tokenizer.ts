/**
 * A byte-level BPE tokenizer trained on one task's text: its corpus (documents,
 * questions, answers, tool schemas) plus its demonstrations rendered through
 * the chat template, so the prompt, tool calls and tool responses become a
 * few tokens each and episodes get short. Written as a standard Hugging Face
 * pair (tokenizer.json + tokenizer_config.json) with the shipped tokenizer's
 * special and added tokens, end-of-turn token and default chat template, so a
 * model made with it loads like any other.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { renderMessages, chatSetup } from "../agent/chat-setup.js";
import { PRETOKENIZE_REGEX, trainByteLevelBpe, WORD_SPLIT_REGEX } from "../model/bpe-trainer.js";
import { defaultTokenizerDir } from "../model/default-tokenizer.js";
import { COMPACT_CHAT_TEMPLATE } from "../model/chat-template.js";
import { Tokenizer } from "../model/tokenizer.js";
import type { Task } from "../tasks/types.js";
import { writeDirectory } from "../util/atomic-write.js";
import { InputError } from "../util/errors.js";

export interface TaskTokenizerOptions {
  /** Total ids (bytes + merges + special/added tokens). */
  vocabSize: number;
  /** Directory to write tokenizer.json and tokenizer_config.json into. */
  out: string;
  /** Seed of the demonstrations mixed into the corpus. Default 0. */
  seed?: number;
  /** Merge a pair only when it occurs this often. Default 40: a name seen only a few times stays split into syllables. */
  minFrequency?: number;
  /** "words" (default): words, spaces and punctuation are separate pieces, so a name tokenizes the same everywhere; "gpt": the shipped tokenizer's GPT-style split (a word carries its leading space). */
  split?: TaskTokenizerSplit;
}

/** Task models list their tools in a few lines (the shipped template's JSON schemas cost ~300 tokens per prompt). */
export const TASK_CHAT_TEMPLATE = COMPACT_CHAT_TEMPLATE;

export type TaskTokenizerSplit = "words" | "gpt";
export const TASK_TOKENIZER_SPLITS: Record<TaskTokenizerSplit, string> = {
  words: WORD_SPLIT_REGEX,
  gpt: PRETOKENIZE_REGEX,
};

interface AddedToken {
  id: number;
  content: string;
  special: boolean;
}

/** The shipped tokenizer's files: the source of the special tokens and the config fields. */
function shippedTokenizer(): { added: AddedToken[]; config: Record<string, unknown> } {
  const dir = defaultTokenizerDir();
  const json = JSON.parse(readFileSync(join(dir, "tokenizer.json"), "utf8")) as { added_tokens: AddedToken[] };
  const config = JSON.parse(readFileSync(join(dir, "tokenizer_config.json"), "utf8")) as Record<string, unknown>;
  return { added: json.added_tokens, config };
}

/** Every text the tasks' episodes are made of: each task's corpus, then its whole rendered demonstrations. */
export function* taskTokenizerCorpus(tasks: Task | Task[], seed = 0): Generator<string> {
  const shipped = Tokenizer.fromDir(defaultTokenizerDir());
  const chat = chatSetup(shipped, { template: TASK_CHAT_TEMPLATE });
  for (const task of Array.isArray(tasks) ? tasks : [tasks]) {
    yield* task.corpus();
    const rows = task.rows("train");
    // quality 0.5: expert and careless turns both appear, as the warm start will show them.
    const demos = task.demonstrations(rows, { seed, quality: 0.5 });
    for (const [i, demo] of demos.entries()) {
      yield renderMessages(chat, demo, { tools: task.makeEnv(rows[i]).tools, addGenerationPrompt: false });
    }
  }
}

/** `tasks`: one task, or several (demonstration worlds) whose text is pooled. */
export async function buildTaskTokenizer(
  tasks: Task | Task[],
  opts: TaskTokenizerOptions,
): Promise<{ dir: string; vocabSize: number }> {
  const { added, config } = shippedTokenizer();
  if (!(Number.isInteger(opts.vocabSize) && opts.vocabSize >= 256 + added.length)) {
    throw new InputError(
      `tokenizer: --vocab must be an integer of at least ${256 + added.length} (256 bytes + ${added.length} special tokens), got ${opts.vocabSize}`,
    );
  }
  const json = trainByteLevelBpe(taskTokenizerCorpus(tasks, opts.seed ?? 0), {
    vocabSize: opts.vocabSize,
    specialTokens: added.filter((t) => t.special).map((t) => t.content),
    addedTokens: added.filter((t) => !t.special).map((t) => t.content),
    minFrequency: opts.minFrequency ?? 40,
    splitPattern: TASK_TOKENIZER_SPLITS[opts.split ?? "words"],
  }) as { added_tokens: AddedToken[] };
  const decoder: Record<string, object> = {};
  for (const t of json.added_tokens) {
    decoder[String(t.id)] = {
      content: t.content,
      lstrip: false,
      normalized: false,
      rstrip: false,
      single_word: false,
      special: t.special,
    };
  }
  writeDirectory(opts.out, (tmp) => {
    writeFileSync(join(tmp, "tokenizer.json"), JSON.stringify(json, null, 2) + "\n");
    writeFileSync(
      join(tmp, "tokenizer_config.json"),
      JSON.stringify({ ...config, chat_template: TASK_CHAT_TEMPLATE, added_tokens_decoder: decoder }, null, 2) + "\n",
    );
  });
  const tok = Tokenizer.fromDir(opts.out);
  return { dir: opts.out, vocabSize: tok.vocabSize };
}
