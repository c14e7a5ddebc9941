import { buildTaskTokenizer, TASK_TOKENIZER_SPLITS, type TaskTokenizerSplit } from "../../train/task-tokenizer.js";
import { noPositionals, optionalNumber, parseFlags, requireString, usageError, type FlagSpec } from "../args.js";
import type { Command } from "../command.js";
import { checkOutDir } from "../../util/out-path.js";
import { FORCE_FLAG } from "./force-flag.js";
import { TASK_FLAGS, taskFromFlags } from "./task-flags.js";
import { worldsFlag, worldsFromFlags } from "./worlds-flag.js";

const FLAGS: FlagSpec = {
  ...TASK_FLAGS,
  vocab: {
    type: "string",
    value: "N",
    description: "total ids: 256 bytes, the special tokens, then merges",
    fallback: 1024,
  },
  out: { type: "string", value: "DIR", description: "the directory to write: new or empty (required)" },
  seed: { type: "string", value: "N", description: "seed of the demonstrations mixed into the corpus", fallback: 0 },
  "min-frequency": {
    type: "string",
    value: "N",
    description: "merge a pair only when it occurs this often (rarer names stay split)",
    fallback: 40,
  },
  split: {
    type: "string",
    value: Object.keys(TASK_TOKENIZER_SPLITS).join("|"),
    description:
      "pre-tokenizer: words, spaces and punctuation apart (words), or GPT-style words with their leading space (gpt)",
    fallback: "words",
  },
  ...worldsFlag(1),
  ...FORCE_FLAG,
};

export const tokenizerCommand: Command = {
  name: "tokenizer",
  summary: "train a byte-level BPE tokenizer on a task's text (tokenizer.json + tokenizer_config.json)",
  usage: "agent-r1 tokenizer --task NAME --out DIR [flags]",
  flags: FLAGS,
  async run(argv, io) {
    const { flags, positionals } = parseFlags("tokenizer", argv, FLAGS);
    noPositionals("tokenizer", positionals);
    const split = flags.split as string | undefined;
    if (split !== undefined && !Object.hasOwn(TASK_TOKENIZER_SPLITS, split))
      throw usageError(
        "tokenizer",
        `--split must be one of ${Object.keys(TASK_TOKENIZER_SPLITS).join(", ")}, got '${split}'`,
      );
    const task = taskFromFlags("tokenizer", flags);
    const out = requireString("tokenizer", flags, "out");
    const vocabSize = optionalNumber("tokenizer", flags, "vocab") ?? 1024;
    const seed = optionalNumber("tokenizer", flags, "seed"),
      minFrequency = optionalNumber("tokenizer", flags, "min-frequency");
    // --worlds N: the text of N worlds from other seeds (as `pretrain` draws its demonstrations), so no name is frequent enough to become a token
    const { worlds, tasks } = worldsFromFlags("tokenizer", flags, task, 1);
    checkOutDir(out, { command: "tokenizer", force: flags.force === true });
    const res = await buildTaskTokenizer(tasks, {
      vocabSize,
      out,
      seed,
      minFrequency,
      split: split as TaskTokenizerSplit | undefined,
    });
    io.out(
      `wrote ${res.dir} (${res.vocabSize} ids, trained on task '${task.name}'${worlds > 1 ? `, ${worlds} worlds` : ""})`,
    );
  },
};
