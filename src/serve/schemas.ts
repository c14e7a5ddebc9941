/**
 * Request bodies of the OpenAI-compatible endpoints, checked with zod.
 * Unknown fields are ignored (clients send many optional ones); fields we
 * accept but cannot honour (penalties, logit_bias, json response_format, ...)
 * are rejected in the handlers with a message naming them. `null` means unset,
 * as OpenAI clients may send it for any optional field.
 */
import { z } from "zod";
import { MAX_TOP_LOGPROBS } from "../engine/local/sampling-params.js";
import { badRequest } from "./errors.js";

/** Choices per request at most. */
export const MAX_N = 64;

const textPart = z.object({ type: z.string(), text: z.string().optional() });
/** String, or an array of content parts (only `text` parts are supported; checked when rendering). */
const content = z.union([z.string(), z.array(textPart)], { error: "expected a string or an array of content parts" });

const toolCall = z.object({
  id: z.string().optional(),
  type: z.literal("function").optional(),
  function: z.object({ name: z.string().min(1), arguments: z.string() }),
});

const message = z.discriminatedUnion("role", [
  z.object({ role: z.literal("system"), content, name: z.string().optional() }),
  z.object({ role: z.literal("developer"), content, name: z.string().optional() }),
  z.object({ role: z.literal("user"), content, name: z.string().optional() }),
  z.object({
    role: z.literal("assistant"),
    content: content.nullish(),
    name: z.string().optional(),
    tool_calls: z.array(toolCall).nullish(),
  }),
  z.object({ role: z.literal("tool"), content, tool_call_id: z.string().optional(), name: z.string().optional() }),
]);
export type RequestMessage = z.infer<typeof message>;

const tool = z.object({
  type: z.literal("function"),
  function: z.object({
    name: z.string().min(1),
    description: z.string().optional(),
    parameters: z.record(z.string(), z.unknown()).optional(),
    strict: z.boolean().nullish(),
  }),
});
export type RequestTool = z.infer<typeof tool>;

const stop = z
  .union([z.string(), z.array(z.string()).max(16)], { error: "expected a string or an array of at most 16 strings" })
  .nullish();

/** Fields the two endpoints share. */
const sampling = {
  model: z.string().optional(),
  temperature: z.number().min(0).max(2).nullish(),
  top_p: z.number().gt(0).max(1).nullish(),
  /** Not in the OpenAI API (vLLM has it): keep the k most likely tokens; 0 or -1 disables. */
  top_k: z.number().int().min(-1).nullish(),
  n: z.number().int().min(1).max(MAX_N).nullish(),
  stop,
  /** Not in the OpenAI API (vLLM has it): more token ids that end a sequence. */
  stop_token_ids: z.array(z.number().int().min(0)).max(64).nullish(),
  /** vLLM's: token_ids and prompt_token_ids are always in this server's choices, so it changes nothing. */
  return_token_ids: z.boolean().nullish(),
  seed: z.number().int().nullish(),
  stream: z.boolean().nullish(),
  stream_options: z.object({ include_usage: z.boolean().nullish() }).nullish(),
  frequency_penalty: z.number().nullish(),
  presence_penalty: z.number().nullish(),
  logit_bias: z.record(z.string(), z.number()).nullish(),
  user: z.string().nullish(),
};

export const chatRequestSchema = z.object({
  ...sampling,
  messages: z.array(message).min(1),
  tools: z.array(tool).nullish(),
  /** "auto", "none", "required" or `{type: "function", function: {name}}`: checked by serve/tool-choice.ts. */
  tool_choice: z.union([z.string(), z.looseObject({ type: z.string() })]).nullish(),
  parallel_tool_calls: z.boolean().nullish(),
  max_tokens: z.number().int().min(1).nullish(),
  max_completion_tokens: z.number().int().min(1).nullish(),
  logprobs: z.boolean().nullish(),
  top_logprobs: z.number().int().min(0).max(MAX_TOP_LOGPROBS).nullish(),
  response_format: z.object({ type: z.string() }).nullish(),
  /** vLLM's and SGLang's: more variables for the chat template (Qwen3's enable_thinking). */
  chat_template_kwargs: z.record(z.string(), z.unknown()).nullish(),
});
export type ChatRequest = z.infer<typeof chatRequestSchema>;

const tokenIds = z.array(z.number().int().min(0)).min(1);

export const completionRequestSchema = z.object({
  ...sampling,
  /** Text, token ids, or a batch of either. */
  prompt: z.union([z.string(), z.array(z.string()).min(1), tokenIds, z.array(tokenIds).min(1)], {
    error: "expected a string, an array of strings, an array of token ids, or an array of arrays of token ids",
  }),
  /** 0 is allowed: with `echo` it scores the prompt without sampling. */
  max_tokens: z.number().int().min(0).nullish(),
  logprobs: z.number().int().min(0).max(MAX_TOP_LOGPROBS).nullish(),
  echo: z.boolean().nullish(),
  suffix: z.string().nullish(),
  best_of: z.number().int().min(1).nullish(),
});
export type CompletionRequest = z.infer<typeof completionRequestSchema>;

/** Parses a request body; the first issue becomes a 400 naming its field. */
export function parseRequest<T extends z.ZodType>(schema: T, body: unknown): z.infer<T> {
  const res = schema.safeParse(body);
  if (res.success) return res.data;
  const issue = res.error.issues[0];
  const param = issue.path.length ? issue.path.map(String).join(".") : null;
  const more = res.error.issues.length > 1 ? ` (and ${res.error.issues.length - 1} more)` : "";
  throw badRequest(`${param ? `${param}: ` : "request body: "}${issue.message}${more}`, param);
}
