/**
 * `tool_choice` beyond "auto" and "none": "required" (some tool must be called) and a named function
 * (that one must be). The model is made to call by forcing the opening of the Hermes call format
 * after the generation prompt: `<tool_call>\n{"name": "` for "required", and the whole head up to the
 * arguments for a named function. The forced text is the server's, not the model's: on the gateway
 * its tokens are recorded as observation (weight 0), and the answer is the forced text followed by
 * what the model sampled.
 */
import { badRequest } from "./errors.js";

export type ToolChoice = "auto" | "none" | "required" | { name: string };

/**
 * The choice as ours, from the chat shape (`{type: "function", function: {name}}`) or the Responses
 * shape (`{type: "function", name}`); a name the request's tools do not have is a 400.
 */
export function parseToolChoice(raw: unknown, toolNames: string[], param = "tool_choice"): ToolChoice {
  if (raw == null || raw === "auto") return "auto";
  if (raw === "none" || raw === "required") {
    if (raw === "required" && toolNames.length === 0)
      throw badRequest(`tool_choice 'required' needs tools: the request has none`, param);
    return raw;
  }
  if (typeof raw === "object" && (raw as { type?: unknown }).type === "function") {
    const r = raw as { name?: unknown; function?: { name?: unknown } };
    const name = r.function?.name ?? r.name;
    if (typeof name !== "string" || name === "") throw badRequest(`tool_choice names no function`, param);
    if (!toolNames.includes(name))
      throw badRequest(
        `tool_choice names '${name}', which is not among the request's tools (${toolNames.join(", ") || "none"})`,
        param,
      );
    return { name };
  }
  const what = typeof raw === "string" ? `'${raw}'` : JSON.stringify(raw).slice(0, 80);
  throw badRequest(
    `tool_choice ${what} is not supported: send 'auto', 'none', 'required' or a function by name`,
    param,
  );
}

/** The text forced after the generation prompt so that the model calls a tool (empty for auto and none). */
export function forcedOpening(choice: ToolChoice): string {
  if (choice === "required") return '<tool_call>\n{"name": "';
  if (typeof choice === "object") return `<tool_call>\n{"name": ${JSON.stringify(choice.name)}, "arguments": `;
  return "";
}
