import { LocalEngine } from "../../engine/local/local-engine.js";
import { encodeChat } from "../../model/chat.js";
import { optionalNumber, parseFlags, requireString } from "../args.js";
import type { Command } from "../command.js";
import { BACKEND_FLAG, BACKEND_USAGE, backendFromFlags } from "./backend-flag.js";

export const generateCommand: Command = {
  name: "generate",
  summary: "print a chat-templated completion of a prompt",
  usage: "agent-r1 generate --model DIR --prompt TEXT [--system TEXT] [--max-tokens N] [--temperature T] [--top-p P] [--top-k K] [--seed N] " + BACKEND_USAGE,
  async run(argv, io) {
    const { flags } = parseFlags("generate", argv, {
      model: { type: "string" },
      prompt: { type: "string" },
      system: { type: "string" },
      "max-tokens": { type: "string" },
      temperature: { type: "string" },
      "top-p": { type: "string" },
      "top-k": { type: "string" },
      seed: { type: "string" },
      ...BACKEND_FLAG,
    });
    const prompt = requireString("generate", flags, "prompt");
    const backend = backendFromFlags("generate", flags, io);
    const engine = await LocalEngine.load(requireString("generate", flags, "model"), { backend });
    const messages = [
      ...(typeof flags.system === "string" ? [{ role: "system" as const, content: flags.system }] : []),
      { role: "user" as const, content: prompt },
    ];
    const ids = encodeChat(engine.tokenizer, messages);
    const res = await engine.sample(ids, {
      maxTokens: optionalNumber("generate", flags, "max-tokens") ?? 128,
      temperature: optionalNumber("generate", flags, "temperature") ?? 0.7,
      topP: optionalNumber("generate", flags, "top-p") ?? 1,
      topK: optionalNumber("generate", flags, "top-k") ?? 0,
      seed: optionalNumber("generate", flags, "seed"),
    });
    io.out(engine.tokenizer.decode(res.sequences[0].tokens, { skipSpecialTokens: true }));
  },
};
