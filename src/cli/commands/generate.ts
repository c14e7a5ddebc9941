import { openModel } from "../engines.js";
import { encodeChat } from "../../model/chat.js";
import { noPositionals, optionalNumber, parseFlags, requireString, type FlagSpec } from "../args.js";
import type { Command } from "../command.js";
import { BACKEND_FLAG, announceBackend, parseBackendFlag } from "./backend-flag.js";

const D = { maxTokens: 128, temperature: 0.7, topP: 1, topK: 0 };

const FLAGS: FlagSpec = {
  model: { type: "string", value: "DIR", description: "the model directory (required)" },
  prompt: { type: "string", value: "TEXT", description: "the user message (required)" },
  system: { type: "string", value: "TEXT", description: "a system message before it" },
  "max-tokens": { type: "string", value: "N", description: "tokens to generate at most", fallback: D.maxTokens },
  temperature: {
    type: "string",
    value: "T",
    description: "sampling temperature; 0 is greedy",
    fallback: D.temperature,
  },
  "top-p": {
    type: "string",
    value: "P",
    description: "nucleus sampling: keep the most likely tokens up to this probability mass",
    fallback: D.topP,
  },
  "top-k": { type: "string", value: "K", description: "keep the K most likely tokens; 0 keeps all", fallback: D.topK },
  seed: { type: "string", value: "N", description: "sampling seed (the same seed gives the same text)" },
  ...BACKEND_FLAG,
};

export const generateCommand: Command = {
  name: "generate",
  summary: "print a chat-templated completion of a prompt",
  usage: "agent-r1 generate --model DIR --prompt TEXT [flags]",
  flags: FLAGS,
  async run(argv, io) {
    const { flags, positionals } = parseFlags("generate", argv, FLAGS);
    noPositionals("generate", positionals);
    const prompt = requireString("generate", flags, "prompt");
    const modelDir = requireString("generate", flags, "model");
    const num = (name: string) => optionalNumber("generate", flags, name);
    const sampling = {
      maxTokens: num("max-tokens") ?? D.maxTokens,
      temperature: num("temperature") ?? D.temperature,
      topP: num("top-p") ?? D.topP,
      topK: num("top-k") ?? D.topK,
      seed: num("seed"),
    };
    const backend = parseBackendFlag("generate", flags);
    const engine = await openModel(modelDir, { backend });
    announceBackend(backend, io);
    const messages = [
      ...(typeof flags.system === "string" ? [{ role: "system" as const, content: flags.system }] : []),
      { role: "user" as const, content: prompt },
    ];
    const ids = encodeChat(engine.tokenizer, messages);
    const res = await engine.sample(ids, sampling);
    io.out(engine.tokenizer.decode(res.sequences[0].tokens, { skipSpecialTokens: true }));
  },
};
