/**
 * Hermes / Qwen tool calls, as Qwen2.5 and Qwen3 write them:
 *   <tool_call>\n{"name": "search", "arguments": {"query": "x"}}\n</tool_call>
 * Several calls per turn; results go back as `tool` messages, which Qwen-style
 * templates render as one user turn of <tool_response> blocks (or, for
 * templates without a tool role, as that user message directly).
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
import { templateJson } from "./json-text.js";

const OPEN = "<tool_call>";
const CLOSE = "</tool_call>";
const USAGE = 'Write each call as <tool_call>{"name": <tool-name>, "arguments": {<args>}}</tool_call>.';

function parseBody(body: string, raw: string): ParsedToolCall {
  const json = body.trim();
  if (json.length === 0) return { ok: false, raw, error: "empty <tool_call> block" };
  let value: unknown;
  try {
    value = JSON.parse(json);
  } catch (err) {
    return { ok: false, raw, error: `malformed JSON: ${(err as Error).message}` };
  }
  return callFromJson(value, ["arguments"], raw);
}

function parse(text: string): ParsedAction {
  const calls: ParsedToolCall[] = [];
  let content = "";
  let at = 0;
  for (;;) {
    const open = text.indexOf(OPEN, at);
    if (open < 0) {
      content += text.slice(at);
      break;
    }
    content += text.slice(at, open);
    const close = text.indexOf(CLOSE, open + OPEN.length);
    if (close < 0) {
      calls.push({ ok: false, raw: text.slice(open), error: `${OPEN} is not closed with ${CLOSE}` });
      break;
    }
    calls.push(parseBody(text.slice(open + OPEN.length, close), text.slice(open, close + CLOSE.length)));
    at = close + CLOSE.length;
  }
  return { content: content.trim(), calls };
}

export interface HermesOptions {
  /**
   * "tool": one `tool` message per result, for templates with a tool role
   * (Qwen 2.5/3 render consecutive ones as one user turn of <tool_response> blocks).
   * "user": one user message of <tool_response> blocks, for templates without one
   * (what Agent-R1's ToolEnv sends).
   */
  results?: "tool" | "user";
}

export function createHermesFormat(opts: HermesOptions = {}): ToolCallFormat {
  const asUser = opts.results === "user";
  return {
    name: asUser ? "hermes-user" : "hermes",
    usage: USAGE,
    parse,
    write: (call) =>
      `${OPEN}\n{"name": ${JSON.stringify(call.name)}, "arguments": ${templateJson(call.arguments)}}\n${CLOSE}`,
    join: (calls) => calls.join("\n"),
    resultMessages(results: ToolResultText[]): AgentMessage[] {
      if (asUser)
        return [
          { role: "user", content: results.map((r) => `<tool_response>\n${r.text}\n</tool_response>`).join("\n") },
        ];
      return results.map((r) =>
        r.name === null ? { role: "tool", content: r.text } : { role: "tool", name: r.name, content: r.text },
      );
    },
    assistantMessage(text: string): AgentMessage {
      const { content, calls } = parse(text);
      const ok = calls.filter(isOk);
      // A call that cannot be parsed has no structured form: keep the text as written.
      if (ok.length === 0 || ok.length < calls.length) return { role: "assistant", content: text };
      return {
        role: "assistant",
        content,
        tool_calls: ok.map((c) => ({ type: "function" as const, function: { name: c.name, arguments: c.arguments } })),
      };
    },
  };
}

export const hermesFormat: ToolCallFormat = createHermesFormat();
