/** Tokenizers and a Llama-3-style chat template for agent tests (no model needed): the shipped BPE under two chat formats. */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Tokenizer } from "../model/tokenizer.js";
import { defaultTokenizerDir } from "../model/default-tokenizer.js";

let chatml: Tokenizer | undefined;

/** The shipped tokenizer: ChatML template, eos <|im_end|>, <tool_call> & co. as added tokens. */
export function chatmlTokenizer(): Tokenizer {
  chatml ??= Tokenizer.fromDir(defaultTokenizerDir());
  return chatml;
}

/**
 * A small Llama-3.1-style template: header tokens around each role, <|eot_id|>
 * closing every turn, JSON tool calls with "parameters", results in role ipython.
 */
export const LLAMA3_TEST_TEMPLATE = String.raw`{{- bos_token -}}
{%- if messages and messages[0].role == "system" -%}
    {%- set system_text = messages[0].content -%}
    {%- set turns = messages[1:] -%}
{%- else -%}
    {%- set system_text = "" -%}
    {%- set turns = messages -%}
{%- endif -%}
{{- "<|start_header_id|>system<|end_header_id|>\n\n" -}}
{%- if tools -%}{{- "Environment: ipython\n" -}}{%- endif -%}
{{- system_text -}}
{%- if tools -%}
    {{- "\n\nTo call a function, respond with JSON: {\"name\": function name, \"parameters\": dictionary of arguments}.\n\n" -}}
    {%- for t in tools -%}{{- (t | tojson) + "\n\n" -}}{%- endfor -%}
{%- endif -%}
{{- "<|eot_id|>" -}}
{%- for m in turns -%}
    {%- if m.role == "assistant" and m.tool_calls -%}
        {{- "<|start_header_id|>assistant<|end_header_id|>\n\n" -}}
        {%- for c in m.tool_calls -%}
            {%- if not loop.first -%}{{- "; " -}}{%- endif -%}
            {{- "{\"name\": " + (c.function.name | tojson) + ", \"parameters\": " + (c.function.arguments | tojson) + "}" -}}
        {%- endfor -%}
        {{- "<|eot_id|>" -}}
    {%- elif m.role == "ipython" or m.role == "tool" -%}
        {{- "<|start_header_id|>ipython<|end_header_id|>\n\n" + m.content + "<|eot_id|>" -}}
    {%- else -%}
        {{- "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n" + (m.content | trim) + "<|eot_id|>" -}}
    {%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- "<|start_header_id|>assistant<|end_header_id|>\n\n" -}}{%- endif -%}
`;

export const LLAMA3_SPECIAL = [
  "<|begin_of_text|>",
  "<|start_header_id|>",
  "<|end_header_id|>",
  "<|eot_id|>",
  "<|python_tag|>",
];

let llama: Tokenizer | undefined;

/** The shipped BPE plus Llama 3's special tokens (ids 1024..1028), eos <|eot_id|>, and the test template. */
export function llama3Tokenizer(): Tokenizer {
  if (llama) return llama;
  const json = JSON.parse(readFileSync(join(defaultTokenizerDir(), "tokenizer.json"), "utf8")) as {
    added_tokens: object[];
  };
  LLAMA3_SPECIAL.forEach((content, i) =>
    json.added_tokens.push({
      id: 1024 + i,
      content,
      single_word: false,
      lstrip: false,
      rstrip: false,
      normalized: false,
      special: true,
    }),
  );
  llama = Tokenizer.fromObjects(json, {
    bos_token: "<|begin_of_text|>",
    eos_token: "<|eot_id|>",
    chat_template: LLAMA3_TEST_TEMPLATE,
  });
  return llama;
}
