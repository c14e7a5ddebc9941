import { buildTaskTokenizer, TASK_TOKENIZER_SPLITS, type TaskTokenizerSplit } from "../../train/task-tokenizer.js";
import { InputError } from "../../util/errors.js";
import { optionalNumber, parseFlags, requireString } from "../args.js";
import type { Command } from "../command.js";
import { checkOutDir, FORCE_FLAG } from "../../util/out-path.js";
import { TASK_FLAGS, taskFromFlags } from "./task-flags.js";
import { WORLDS_FLAG, worldsFromFlags } from "./worlds-flag.js";

export const tokenizerCommand: Command = {
  name: "tokenizer",
  summary: "train a byte-level BPE tokenizer on a task's text (tokenizer.json + tokenizer_config.json)",
  usage: "agent-r1 tokenizer --task multihop|calc --vocab N --out DIR [--seed N] [--min-frequency N] [--split words|gpt] [--worlds N] [--option name=value ...] [--force]  (--out must be new or empty; --force replaces a non-empty one)",
  async run(argv, io) {
    const { flags } = parseFlags("tokenizer", argv, { ...TASK_FLAGS, vocab: { type: "string" }, out: { type: "string" }, seed: { type: "string" }, "min-frequency": { type: "string" }, split: { type: "string" }, ...WORLDS_FLAG, ...FORCE_FLAG });
    const split = flags.split as string | undefined;
    if (split !== undefined && !(split in TASK_TOKENIZER_SPLITS)) throw new InputError(`tokenizer: --split must be one of ${Object.keys(TASK_TOKENIZER_SPLITS).join(", ")}, got '${split}'`);
    const task = taskFromFlags("tokenizer", flags);
    const out = requireString("tokenizer", flags, "out");
    checkOutDir(out, { command: "tokenizer", force: flags.force === true });
    const vocabSize = optionalNumber("tokenizer", flags, "vocab") ?? 1024;
    // --worlds N: the text of N worlds from other seeds (as `pretrain` draws its demonstrations), so no name is frequent enough to become a token
    const { worlds, tasks } = worldsFromFlags("tokenizer", flags, task, 1);
    const res = await buildTaskTokenizer(tasks, { vocabSize, out, seed: optionalNumber("tokenizer", flags, "seed"), minFrequency: optionalNumber("tokenizer", flags, "min-frequency"), split: split as TaskTokenizerSplit | undefined });
    io.out(`wrote ${res.dir} (${res.vocabSize} ids, trained on task '${task.name}'${worlds > 1 ? `, ${worlds} worlds` : ""})`);
  },
};
