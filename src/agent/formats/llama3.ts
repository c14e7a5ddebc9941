/**
 * Llama 3.1 JSON tool calls (custom tools): the whole assistant turn is a JSON
 * object, optionally after <|python_tag|>, several separated by ";":
 *   {"name": "search", "parameters": {"query": "x"}}
 * Results go back in role `ipython`. A turn that does not start with "{" is
 * plain text (an answer), not a call.
 */
import type { AgentMessage } from "../chat-setup.js";
import {
  callFromJson,
  isOk,
  type ParsedAction,
  type ParsedToolCall,
  type ToolCallFormat,
  type ToolResultText,
} from "./types.js";
import { scanJsonObject, templateJson } from "./json-text.js";

const PYTHON_TAG = "<|python_tag|>";
const USAGE = 'Reply with only {"name": <tool-name>, "parameters": {<args>}}; separate several calls with ";".';
// "arguments" is what some fine-tunes write; vLLM's llama3_json parser accepts both.
const ARG_KEYS = ["parameters", "arguments"] as const;

function parse(text: string): ParsedAction {
  let body = text.trimStart();
  if (body.startsWith(PYTHON_TAG)) body = body.slice(PYTHON_TAG.length).trimStart();
  if (!body.startsWith("{")) return { content: text.trim(), calls: [] };
  const calls: ParsedToolCall[] = [];
  let at = 0;
  while (at < body.length && body[at] === "{") {
    const end = scanJsonObject(body, at);
    if (end < 0) {
      calls.push({ ok: false, raw: body.slice(at), error: "the JSON object is not closed" });
      return { content: "", calls };
    }
    const raw = body.slice(at, end);
    let value: unknown;
    try {
      value = JSON.parse(raw);
      calls.push(callFromJson(value, ARG_KEYS, raw));
    } catch (err) {
      calls.push({ ok: false, raw, error: `malformed JSON: ${(err as Error).message}` });
    }
    at = end;
    const sep = /^\s*;?\s*/.exec(body.slice(at));
    at += sep ? sep[0].length : 0;
  }
  return { content: body.slice(at).trim(), calls };
}

export const llama3JsonFormat: ToolCallFormat = {
  name: "llama3_json",
  usage: USAGE,
  parse,
  write: (call) => `{"name": ${JSON.stringify(call.name)}, "parameters": ${templateJson(call.arguments)}}`,
  join: (calls) => calls.join("; "),
  resultMessages: (results: ToolResultText[]): AgentMessage[] =>
    results.map((r) => ({ role: "ipython", content: r.text })),
  assistantMessage(text: string): AgentMessage {
    const { content, calls } = parse(text);
    const ok = calls.filter(isOk);
    if (ok.length === 0 || ok.length < calls.length || content !== "") return { role: "assistant", content: text };
    return {
      role: "assistant",
      content: "",
      tool_calls: ok.map((c) => ({ type: "function" as const, function: { name: c.name, arguments: c.arguments } })),
    };
  },
};
