import { existsSync } from "node:fs";
import { readTextInput } from "../../util/read-file.js";
import { join } from "node:path";
import { Tokenizer } from "../../model/tokenizer.js";
import { renderChat } from "../../model/chat.js";
import type { ChatMessage, ToolSchema } from "../../model/chat-template.js";
import { helpHint, noPositionals, parseFlags, requireString, usageError, type FlagSpec } from "../args.js";
import { InputError, ModelFormatError } from "../../util/errors.js";
import type { Command } from "../command.js";

const FLAGS: FlagSpec = {
  model: { type: "string", value: "DIR", description: "the model directory whose tokenizer to use (required)" },
  text: { type: "string", value: "TEXT", description: "encode this text as it is (give --text or --messages)" },
  messages: {
    type: "string",
    value: "FILE.json",
    description: 'encode a chat: a JSON array of messages (or {"messages": [...]}) rendered with the generation prompt',
  },
  tools: {
    type: "string",
    value: "FILE.json",
    description: "with --messages: a JSON array of tool schemas for the template",
  },
  show: { type: "boolean", default: false, description: "print the encoded text before the ids" },
};

function readJson(file: string, what: string): unknown {
  const text = readTextInput(file, (words) => new InputError(`${file}: ${words}`));
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new InputError(`${file}: ${what} is not valid JSON (${(e as Error).message})`);
  }
}

function readMessages(file: string): ChatMessage[] {
  const v = readJson(file, "--messages");
  const list = Array.isArray(v) ? v : (v as { messages?: unknown })?.messages;
  if (!Array.isArray(list)) throw new InputError(`${file}: expected a JSON array of messages (or {"messages": [...]})`);
  list.forEach((m, i) => {
    const role = (m as ChatMessage)?.role;
    if (!["system", "user", "assistant", "tool"].includes(role))
      throw new InputError(`${file}: message ${i}: role must be system, user, assistant or tool`);
    if (typeof (m as ChatMessage).content !== "string" && !(m as ChatMessage).tool_calls)
      throw new InputError(`${file}: message ${i}: content must be a string`);
  });
  return list as ChatMessage[];
}

function readTools(file: string): ToolSchema[] {
  const v = readJson(file, "--tools");
  if (!Array.isArray(v)) throw new InputError(`${file}: expected a JSON array of tools`);
  return v.map((t, i) => {
    // Accept both the OpenAI shape {type:"function", function:{...}} and a bare {name, description, parameters}.
    const fn = (t as ToolSchema)?.function ?? t;
    if (typeof fn?.name !== "string") throw new InputError(`${file}: tool ${i}: missing 'name'`);
    return {
      type: "function",
      function: {
        name: fn.name,
        description: fn.description,
        parameters: fn.parameters ?? { type: "object", properties: {} },
      },
    };
  });
}

export const tokenizeCommand: Command = {
  name: "tokenize",
  summary: "print the token ids of a text, or of a chat rendered with the model's template",
  usage: "agent-r1 tokenize --model DIR (--text TEXT | --messages FILE.json) [flags]",
  flags: FLAGS,
  async run(argv, io) {
    const { flags, positionals } = parseFlags("tokenize", argv, FLAGS);
    noPositionals("tokenize", positionals);
    const dir = requireString("tokenize", flags, "model");
    if (flags.text === undefined && flags.messages === undefined)
      throw usageError("tokenize", "give --text TEXT or --messages FILE.json", helpHint("tokenize"));
    if (flags.text !== undefined && flags.messages !== undefined)
      throw usageError("tokenize", "give --text or --messages, not both");
    if (flags.tools !== undefined && flags.messages === undefined)
      throw usageError("tokenize", "--tools applies to --messages FILE.json only");
    if (!existsSync(join(dir, "tokenizer.json")))
      throw new ModelFormatError(join(dir, "tokenizer.json"), undefined, "file not found");
    const tok = Tokenizer.fromDir(dir);
    let text: string;
    if (typeof flags.text === "string") text = flags.text;
    else {
      const tools = typeof flags.tools === "string" ? readTools(flags.tools) : undefined;
      text = renderChat(tok, readMessages(flags.messages as string), { tools, addGenerationPrompt: true });
    }
    const ids = tok.encode(text);
    if (flags.show) io.out(text);
    io.out(JSON.stringify(ids));
  },
};
