/**
 * The request body of POST /responses (the OpenAI Responses API), checked with zod, and the
 * fields this project cannot honour, refused by name.
 *
 * Accepted: `input` (a string, or a list of items: messages with text parts or string content,
 * `function_call`, `function_call_output`, `item_reference`, and `reasoning` items, which are
 * dropped: this server's models produce none, so there is no hidden reasoning to resume),
 * `instructions`, function `tools`, `tool_choice` "auto" or "none", `max_output_tokens`,
 * `temperature`, `top_p`, `stream`, `previous_response_id`, `store`; and, accepted but changing
 * nothing, `parallel_tool_calls`, `metadata`, `user`, `include`, `text.verbosity`,
 * `service_tier`, the prompt-cache fields and every field this file does not name.
 *
 * Refused with a 400 naming the field: hosted tools (web_search, file_search, code_interpreter,
 * computer use, mcp, image_generation, ...), a forced `tool_choice` ("required" or a named
 * function), `background`, `conversation`, `prompt` templates, a `reasoning` effort other than
 * "none" (or a reasoning summary), `text.format` other than "text", `truncation: "auto"`,
 * `top_logprobs`, `context_management`, image, file and audio inputs, and item types other than
 * the ones above.
 */
import { z } from "zod";
import { badRequest } from "./errors.js";

const functionTool = z.object({
  type: z.literal("function"),
  name: z.string().min(1),
  description: z.string().nullish(),
  parameters: z.record(z.string(), z.unknown()).nullish(),
  strict: z.boolean().nullish(),
});
export type ResponsesTool = z.infer<typeof functionTool>;

export const responsesRequestSchema = z.object({
  model: z.string().optional(),
  input: z.union([z.string(), z.array(z.unknown())], { error: "expected a string or an array of input items" }),
  instructions: z.string().nullish(),
  /** Checked one by one (checkTools): a hosted tool is refused by its own index. */
  tools: z.array(z.looseObject({ type: z.string() })).nullish(),
  tool_choice: z.union([z.string(), z.looseObject({ type: z.string() })]).nullish(),
  max_output_tokens: z.number().int().min(1).nullish(),
  temperature: z.number().min(0).max(2).nullish(),
  top_p: z.number().gt(0).max(1).nullish(),
  stream: z.boolean().nullish(),
  previous_response_id: z.string().min(1).nullish(),
  store: z.boolean().nullish(),
  parallel_tool_calls: z.boolean().nullish(),
  metadata: z.record(z.string(), z.string()).nullish(),
  user: z.string().nullish(),
  include: z.array(z.string()).nullish(),
  text: z
    .looseObject({ format: z.looseObject({ type: z.string() }).nullish(), verbosity: z.string().nullish() })
    .nullish(),
  reasoning: z
    .looseObject({
      effort: z.string().nullish(),
      summary: z.string().nullish(),
      generate_summary: z.string().nullish(),
    })
    .nullish(),
  background: z.boolean().nullish(),
  conversation: z.unknown().optional(),
  prompt: z.unknown().optional(),
  truncation: z.enum(["auto", "disabled"]).nullish(),
  top_logprobs: z.number().int().min(0).nullish(),
  context_management: z.unknown().optional(),
});
export type ResponsesRequest = z.infer<typeof responsesRequestSchema>;

/** What the model cannot do, by field. */
export function refuseUnsupported(req: ResponsesRequest): void {
  if (req.background)
    throw badRequest("background responses are not supported by this server; send background: false", "background");
  if (req.conversation != null)
    throw badRequest(
      "conversation objects are not supported by this server; chain responses with previous_response_id, or send the whole input",
      "conversation",
    );
  if (req.prompt != null)
    throw badRequest("prompt templates are not supported by this server; send instructions and input", "prompt");
  const effort = req.reasoning?.effort;
  if (effort != null && effort !== "none")
    throw badRequest(
      `reasoning effort '${effort}' needs a reasoning model; this server's model does not reason (send none, or leave reasoning out)`,
      "reasoning.effort",
    );
  if (req.reasoning?.summary != null || req.reasoning?.generate_summary != null)
    throw badRequest(
      "reasoning summaries need a reasoning model; this server's model does not reason",
      req.reasoning?.summary != null ? "reasoning.summary" : "reasoning.generate_summary",
    );
  const format = req.text?.format?.type;
  if (format != null && format !== "text")
    throw badRequest(`text.format '${format}' is not supported by this server (only 'text')`, "text.format");
  if (req.truncation === "auto")
    throw badRequest(
      "truncation 'auto' is not supported by this server: it never drops input items (send 'disabled')",
      "truncation",
    );
  if (req.top_logprobs) throw badRequest("top_logprobs is not supported by the responses route", "top_logprobs");
  if (req.context_management != null)
    throw badRequest("context_management is not supported by this server", "context_management");
}

/** The request's tools, each a function tool; a hosted or custom tool is refused by its index. */
export function checkTools(tools: ResponsesRequest["tools"]): ResponsesTool[] {
  return (tools ?? []).map((t, i) => {
    if (t.type !== "function")
      throw badRequest(
        `tool type '${t.type}' is not supported by this server: it runs no hosted tools, only function tools the client runs itself`,
        `tools.${i}.type`,
      );
    return parseAt(functionTool, t, `tools.${i}`);
  });
}

const textPart = z.looseObject({ type: z.string(), text: z.string().optional() });
const messageItem = z.looseObject({
  role: z.enum(["user", "system", "developer", "assistant"]),
  content: z.union([z.string(), z.array(textPart)], { error: "expected a string or an array of content parts" }),
});
const functionCallItem = z.looseObject({
  call_id: z.string().min(1),
  name: z.string().min(1),
  arguments: z.string(),
});
const functionCallOutputItem = z.looseObject({
  call_id: z.string().min(1),
  output: z.union([z.string(), z.array(textPart)], { error: "expected a string or an array of content parts" }),
});
const itemReference = z.looseObject({ id: z.string().min(1) });

/** One input item, read: the forms the chat template can render. */
export type InputItem =
  | { type: "message"; role: "user" | "system" | "developer" | "assistant"; text: string }
  | { type: "function_call"; callId: string; name: string; arguments: string }
  | { type: "function_call_output"; callId: string; output: string }
  | { type: "item_reference"; id: string }
  | { type: "reasoning" };

/** Reads `input[index]`; errors name the field (`input.3.content.1`, ...). */
export function parseInputItem(value: unknown, index: number): InputItem {
  const at = `input.${index}`;
  if (typeof value !== "object" || value === null || Array.isArray(value))
    throw badRequest(`${at}: expected an input item (an object)`, at);
  const raw = value as { type?: unknown; role?: unknown };
  const type = raw.type ?? (raw.role !== undefined ? "message" : undefined);
  switch (type) {
    case "message": {
      const m = parseAt(messageItem, value, at);
      return { type: "message", role: m.role, text: partsText(m.content, `${at}.content`) };
    }
    case "function_call": {
      const c = parseAt(functionCallItem, value, at);
      checkArguments(c.arguments, `${at}.arguments`);
      return { type: "function_call", callId: c.call_id, name: c.name, arguments: c.arguments };
    }
    case "function_call_output": {
      const o = parseAt(functionCallOutputItem, value, at);
      return { type: "function_call_output", callId: o.call_id, output: partsText(o.output, `${at}.output`) };
    }
    case "item_reference":
      return { type: "item_reference", id: parseAt(itemReference, value, at).id };
    case "reasoning":
      return { type: "reasoning" };
    case undefined:
      throw badRequest(`${at}: an input item needs a type (or a role, for a message)`, `${at}.type`);
    default:
      throw badRequest(
        `${at}: input items of type '${String(type)}' are not supported by this server (messages, function_call, function_call_output, item_reference and reasoning are)`,
        `${at}.type`,
      );
  }
}

/** The chat template renders arguments as an object: a string that is not a JSON object is refused. */
function checkArguments(args: string, param: string): void {
  let value: unknown;
  try {
    value = JSON.parse(args);
  } catch {
    value = undefined;
  }
  if (typeof value !== "object" || value === null || Array.isArray(value))
    throw badRequest(`${param}: function call arguments must be a JSON object encoded as a string`, param);
}

/** Text parts joined; image, file and audio parts are refused by their index. */
function partsText(content: string | z.infer<typeof textPart>[], param: string): string {
  if (typeof content === "string") return content;
  return content
    .map((part, j) => {
      const text = part.type === "input_text" || part.type === "output_text" || part.type === "text";
      if (!text || part.text === undefined)
        throw badRequest(
          `${param}.${j}: content parts of type '${part.type}' are not supported by this server (only text: input_text, output_text)`,
          `${param}.${j}`,
        );
      return part.text;
    })
    .join("");
}

/** `schema.parse(value)` with the first issue as a 400 naming its field under `prefix`. */
function parseAt<T extends z.ZodType>(schema: T, value: unknown, prefix: string): z.infer<T> {
  const res = schema.safeParse(value);
  if (res.success) return res.data;
  const issue = res.error.issues[0];
  const param = [prefix, ...issue.path.map(String)].join(".");
  throw badRequest(`${param}: ${issue.message}`, param);
}
