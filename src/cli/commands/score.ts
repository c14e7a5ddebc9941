import { openModel } from "../engines.js";
import { readTextInput } from "../../util/read-file.js";
import { noPositionals, parseFlags, requireString, type FlagSpec } from "../args.js";
import { InputError } from "../../util/errors.js";
import type { Command } from "../command.js";
import { BACKEND_FLAG, announceBackend, parseBackendFlag } from "./backend-flag.js";

const FLAGS: FlagSpec = {
  model: { type: "string", value: "DIR", description: "the model directory (required)" },
  input: {
    type: "string",
    value: "FILE.jsonl",
    description: 'lines {"tokens":[...]}; each prints a line {"logprobs":[null, ...]} (required)',
  },
  ...BACKEND_FLAG,
};

/** Reads `{"tokens":[...]}` lines; errors name the file and the line. */
export function readTokenLines(file: string): number[][] {
  const rows: number[][] = [];
  readTextInput(file, (words) => new InputError(`${file}: ${words}`))
    .split("\n")
    .forEach((line, i) => {
      if (line.trim() === "") return;
      let obj: unknown;
      try {
        obj = JSON.parse(line);
      } catch {
        throw new InputError(`${file}:${i + 1}: not valid JSON`);
      }
      const tokens = (obj as { tokens?: unknown })?.tokens;
      if (!Array.isArray(tokens) || tokens.length === 0 || !tokens.every((t) => Number.isInteger(t))) {
        throw new InputError(`${file}:${i + 1}: field 'tokens' must be a non-empty array of integers`);
      }
      rows.push(tokens as number[]);
    });
  return rows;
}

export const scoreCommand: Command = {
  name: "score",
  summary: "print the logprob of every token given the ones before it",
  usage: "agent-r1 score --model DIR --input FILE.jsonl [flags]",
  flags: FLAGS,
  async run(argv, io) {
    const { flags, positionals } = parseFlags("score", argv, FLAGS);
    noPositionals("score", positionals);
    const input = requireString("score", flags, "input"),
      modelDir = requireString("score", flags, "model");
    const backend = parseBackendFlag("score", flags);
    const rows = readTokenLines(input);
    const engine = await openModel(modelDir, { backend });
    announceBackend(backend, io);
    const lps = await engine.computeLogprobs(rows);
    for (const lp of lps) io.out(JSON.stringify({ logprobs: lp }));
  },
};
