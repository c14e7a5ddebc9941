/**
 * GSM8K JSONL ({ question, answer } where the answer ends with "#### 42")
 * -> TaskRows for the calculator env. Ground truth: the text after the last
 * "####", trimmed, commas removed ("#### 1,200" -> "1200"); it must be a
 * number. extra_info.solution keeps the whole worked answer.
 * extra_info.index counts the rows kept (0, 1, ...).
 */
import { z } from "zod";
import { makeRow } from "../tasks/common/row.js";
import { CALC_SYSTEM_PROMPT } from "../tasks/calc/prompt.js";
import type { TaskRow } from "../tasks/types.js";
import { parseJsonl, readTextFile } from "./jsonl.js";
import { BadRow, type ReadOptions, type ReadResult } from "./read-result.js";

const recordSchema = z.object({ question: z.string().min(1), answer: z.string() });

export interface Gsm8kOptions extends ReadOptions {
  /** extra_info.split of the rows. Default "train". */
  split?: string;
  /** Default: CALC_SYSTEM_PROMPT. */
  systemPrompt?: string;
}

export const GSM8K_DATA_SOURCE = "openai/gsm8k";

/** "... #### 1,200" -> "1200". */
export function gsm8kFinalAnswer(solution: string): string {
  const at = solution.lastIndexOf("####");
  if (at < 0) throw new BadRow("answer: no '#### <number>' at its end");
  const final = solution
    .slice(at + 4)
    .trim()
    .replace(/,/g, "");
  if (!/^-?\d+(\.\d+)?$/.test(final))
    throw new BadRow(`answer: '#### ${solution.slice(at + 4).trim()}' is not a number`);
  return final;
}

export function gsm8kRow(value: unknown, index: number, opts: Gsm8kOptions = {}): TaskRow {
  const r = recordSchema.safeParse(value);
  if (!r.success) throw new BadRow(`${r.error.issues[0].path.join(".") || "record"}: ${r.error.issues[0].message}`);
  return makeRow({
    dataSource: GSM8K_DATA_SOURCE,
    ability: "math",
    system: opts.systemPrompt ?? CALC_SYSTEM_PROMPT,
    question: r.data.question,
    answer: gsm8kFinalAnswer(r.data.answer),
    split: opts.split ?? "train",
    index,
    tools: ["calculator"],
    extra: { solution: r.data.answer },
  });
}

export function loadGsm8k(path: string, opts: Gsm8kOptions = {}): ReadResult<TaskRow> {
  return parseJsonl(readTextFile(path), path, (v, kept) => gsm8kRow(v, kept, opts), opts);
}
