/**
 * HotpotQA's official JSON (hotpot_train_v1.1.json, hotpot_dev_distractor_v1.json):
 * one array of { _id, question, answer, supporting_facts: [[title, sent_id]],
 * context: [[title, [sentences]]], type, level }.
 * -> TaskRows (search-only system prompt, ground truth = answer) and the
 *    documents of every context paragraph: id = title = the paragraph's title,
 *    text = its sentences joined as given (HotpotQA keeps the spaces between
 *    sentences inside them); a title seen again keeps its first text.
 * Record numbers in errors count from 1.
 */
import { z } from "zod";
import { InputError } from "../util/errors.js";
import { makeRow } from "../tasks/common/row.js";
import { SEARCH_SYSTEM_PROMPT } from "../tasks/multihop/prompt.js";
import type { TaskRow } from "../tasks/types.js";
import type { SearchDocument } from "./documents.js";
import { readTextFile } from "./jsonl.js";
import { BadRow, collectRows, messageOf, type ReadOptions } from "./read-result.js";

const recordSchema = z.object({
  _id: z.string(),
  question: z.string().min(1),
  answer: z.string(),
  supporting_facts: z.array(z.tuple([z.string(), z.number().int()])).default([]),
  context: z.array(z.tuple([z.string(), z.array(z.string())])),
  type: z.string().optional(),
  level: z.string().optional(),
});
export type HotpotRecord = z.output<typeof recordSchema>;

export interface HotpotOptions extends ReadOptions {
  /** extra_info.split of the rows. Default "train". */
  split?: string;
  /** Default: SEARCH_SYSTEM_PROMPT. */
  systemPrompt?: string;
}

export interface HotpotData {
  rows: TaskRow[];
  documents: SearchDocument[];
  skipped: number;
}

export const HOTPOTQA_DATA_SOURCE = "hotpotqa/hotpot_qa";

export function hotpotRow(r: HotpotRecord, index: number, opts: HotpotOptions = {}): TaskRow {
  return makeRow({
    dataSource: HOTPOTQA_DATA_SOURCE,
    ability: "multihop_qa",
    system: opts.systemPrompt ?? SEARCH_SYSTEM_PROMPT,
    question: r.question,
    answer: r.answer,
    split: opts.split ?? "train",
    index,
    tools: ["search"],
    extra: {
      id: r._id,
      ...(r.type !== undefined ? { type: r.type } : {}),
      ...(r.level !== undefined ? { level: r.level } : {}),
      supporting_facts: r.supporting_facts,
    },
  });
}

/** Rows and documents from parsed HotpotQA JSON (`file` names the source in errors). */
export function hotpotFromJson(value: unknown, file: string, opts: HotpotOptions = {}): HotpotData {
  if (!Array.isArray(value))
    throw new InputError(
      `${file}: expected a JSON array of HotpotQA records, got ${value === null ? "null" : typeof value}`,
    );
  const docs = new Map<string, SearchDocument>();
  const { rows, skipped } = collectRows(
    file,
    "record",
    value.map((v, i): [number, unknown] => [i + 1, v]),
    (raw, kept) => {
      const parsed = recordSchema.safeParse(raw);
      if (!parsed.success) {
        const issue = parsed.error.issues[0];
        throw new BadRow(`${issue.path.join(".") || "record"}: ${issue.message}`);
      }
      for (const [title, sentences] of parsed.data.context)
        if (!docs.has(title)) docs.set(title, { id: title, title, text: sentences.join("") });
      return hotpotRow(parsed.data, kept, opts);
    },
    opts,
  );
  return { rows, documents: [...docs.values()], skipped };
}

export function loadHotpotQa(path: string, opts: HotpotOptions = {}): HotpotData {
  let value: unknown;
  try {
    value = JSON.parse(readTextFile(path));
  } catch (err) {
    if (err instanceof InputError) throw err;
    throw new InputError(
      `${path}: invalid JSON: ${messageOf(err)}`,
      "HotpotQA files are one JSON array (hotpot_dev_distractor_v1.json)",
    );
  }
  return hotpotFromJson(value, path, opts);
}
