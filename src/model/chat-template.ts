/** Chat-template rendering (Jinja, as in tokenizer_config.json, bounded by ./template-limits.ts) plus our default ChatML-with-tools template. */
import { Template } from "@huggingface/jinja";
import { ModelFormatError } from "../util/errors.js";
import {
  DEFAULT_TEMPLATE_LIMITS,
  renderBounded,
  TemplateLimitError,
  type TemplateLimits,
  type TemplateProgram,
} from "./template-limits.js";

export type ChatRole = "system" | "user" | "assistant" | "tool" | "ipython";

export interface ToolCall {
  type?: "function";
  /** arguments: a JSON string (rendered verbatim) or an object (rendered with tojson). */
  function: { name: string; arguments: string | object };
}

export interface ChatMessage {
  role: ChatRole;
  content: string;
  tool_calls?: ToolCall[];
  name?: string;
  tool_call_id?: string;
}

export interface ToolSchema {
  type: "function";
  function: { name: string; description?: string; parameters: object };
}

export interface RenderChatOptions {
  messages: ChatMessage[];
  tools?: ToolSchema[];
  addGenerationPrompt?: boolean;
  bosToken?: string;
  eosToken?: string;
  /** Extra template variables (e.g. enable_thinking); cannot override the ones above. */
  extra?: Record<string, unknown>;
  /** Time and size bounds of the render (templates come from hubs); defaults in DEFAULT_TEMPLATE_LIMITS. */
  limits?: Partial<TemplateLimits>;
}

export const DEFAULT_SYSTEM_PROMPT = "You are a helpful assistant.";

/**
 * Qwen2.5-style ChatML with tools. Output shape:
 *   <|im_start|>system\n{system}[\n\n# Tools ... <tools>\n{tool json}\n</tools> ...]<|im_end|>\n
 *   <|im_start|>assistant[\n{content}]\n<tool_call>\n{"name": .., "arguments": ..}\n</tool_call><|im_end|>\n
 *   <|im_start|>user\n<tool_response>\n{r1}\n</tool_response>\n<tool_response>\n{r2}\n</tool_response><|im_end|>\n
 */
const FULL_TOOLS_BLOCK = String.raw`{%- if tools -%}
    {{- "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n" -}}
    {{- "You are provided with function signatures within <tools></tools> XML tags:\n<tools>" -}}
    {%- for tool in tools -%}
        {{- "\n" + (tool | tojson) -}}
    {%- endfor -%}
    {{- "\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n" -}}
    {{- "<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>" -}}
{%- endif -%}
`;
/** One line per tool: `- name(arg: type, ...): description`, then the call format in one line. */
const COMPACT_TOOLS_BLOCK = String.raw`{%- if tools -%}
    {{- "\nTools:" -}}
    {%- for tool in tools -%}
        {{- "\n- " + tool.function.name + "(" -}}
        {%- if tool.function.parameters and tool.function.parameters.properties -%}
            {%- for arg, spec in tool.function.parameters.properties.items() -%}
                {{- arg -}}{%- if spec.type is string -%}{{- ": " + spec.type -}}{%- endif -%}{%- if not loop.last -%}{{- ", " -}}{%- endif -%}
            {%- endfor -%}
        {%- endif -%}
        {{- ")" -}}
        {%- if tool.function.description -%}{{- ": " + tool.function.description -}}{%- endif -%}
    {%- endfor -%}
    {{- "\nCall one as <tool_call>\n{\"name\": ..., \"arguments\": {...}}\n</tool_call>" -}}
{%- endif -%}
`;
function chatMLTemplate(name: string, toolsBlock: string): string {
  return String.raw`{#- agent-r1 ${name}: ChatML with tool calls -#}
{%- if messages and messages[0].role == "system" -%}
    {%- set system_text = messages[0].content -%}
    {%- set turns = messages[1:] -%}
{%- else -%}
    {%- set system_text = "${DEFAULT_SYSTEM_PROMPT}" -%}
    {%- set turns = messages -%}
{%- endif -%}
{{- "<|im_start|>system\n" + system_text -}}
${toolsBlock}{{- "<|im_end|>\n" -}}
{%- for message in turns -%}
    {%- if message.role == "tool" -%}
        {%- if loop.first or turns[loop.index0 - 1].role != "tool" -%}
            {{- "<|im_start|>user" -}}
        {%- endif -%}
        {{- "\n<tool_response>\n" + message.content + "\n</tool_response>" -}}
        {%- if loop.last or turns[loop.index0 + 1].role != "tool" -%}
            {{- "<|im_end|>\n" -}}
        {%- endif -%}
    {%- elif message.role == "assistant" and message.tool_calls -%}
        {{- "<|im_start|>assistant" -}}
        {%- if message.content -%}
            {{- "\n" + message.content -}}
        {%- endif -%}
        {%- for call in message.tool_calls -%}
            {%- set args = call.function.arguments -%}
            {{- "\n<tool_call>\n{\"name\": " + (call.function.name | tojson) + ", \"arguments\": " -}}
            {%- if args is string -%}{{- args -}}{%- else -%}{{- args | tojson -}}{%- endif -%}
            {{- "}\n</tool_call>" -}}
        {%- endfor -%}
        {{- "<|im_end|>\n" -}}
    {%- else -%}
        {{- "<|im_start|>" + message.role + "\n" + message.content + "<|im_end|>\n" -}}
    {%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{- "<|im_start|>assistant\n" -}}
{%- endif -%}
`;
}
export const DEFAULT_CHAT_TEMPLATE: string = chatMLTemplate("default", FULL_TOOLS_BLOCK);

/**
 * The same ChatML, with the tool list in a few lines instead of JSON schemas (~60 tokens instead
 * of ~300 for two tools): the template of the task tokenizers, for models whose whole context is
 * a few hundred tokens. Turns, tool calls and tool responses render exactly as in the default.
 */
export const COMPACT_CHAT_TEMPLATE: string = chatMLTemplate("compact", COMPACT_TOOLS_BLOCK);

const FILE = "tokenizer_config.json";
const FIELD = "chat_template";
const compiled = new Map<string, TemplateProgram>();

function compile(template: string): TemplateProgram {
  let t = compiled.get(template);
  if (t) return t;
  try {
    t = new Template(template).parsed;
  } catch (err) {
    throw new ModelFormatError(FILE, FIELD, `cannot parse chat template: ${(err as Error).message}`);
  }
  if (compiled.size >= 16) compiled.delete(compiled.keys().next().value as string);
  compiled.set(template, t);
  return t;
}

/** Drops undefined fields so templates see them as undefined, and nulls content to "". */
function plainMessage(m: ChatMessage): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(m)) if (v !== undefined) out[k] = v;
  out.content = m.content ?? "";
  return out;
}

export function renderChatTemplate(template: string, opts: RenderChatOptions): string {
  const tpl = compile(template);
  const ctx: Record<string, unknown> = { ...(opts.extra ?? {}) };
  ctx.messages = opts.messages.map(plainMessage);
  if (opts.tools && opts.tools.length > 0) ctx.tools = opts.tools;
  ctx.add_generation_prompt = opts.addGenerationPrompt ?? false;
  if (opts.bosToken !== undefined) ctx.bos_token = opts.bosToken;
  if (opts.eosToken !== undefined) ctx.eos_token = opts.eosToken;
  const limits = opts.limits ? { ...DEFAULT_TEMPLATE_LIMITS, ...opts.limits } : DEFAULT_TEMPLATE_LIMITS;
  try {
    return renderBounded(tpl, ctx, limits);
  } catch (err) {
    if (err instanceof TemplateLimitError) {
      throw new ModelFormatError(
        FILE,
        FIELD,
        `chat template stopped: ${err.message}`,
        "no real chat template comes near this; use a trusted template",
      );
    }
    throw new ModelFormatError(FILE, FIELD, `chat template failed to render: ${(err as Error).message}`);
  }
}
