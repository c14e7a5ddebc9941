/**
 * The TaskRow schema (Agent-R1's row format, src/tasks/types.ts), for rows
 * read from files. Unknown top-level columns are dropped; messages and
 * reward_model are strict; extra_info keeps every field.
 */
import { z } from "zod";
import type { TaskRow } from "../tasks/types.js";
import { BadRow } from "./read-result.js";

const toolCall = z.strictObject({
  type: z.literal("function").optional(),
  function: z.strictObject({ name: z.string(), arguments: z.union([z.string(), z.record(z.string(), z.unknown())]) }),
});

export const chatMessageSchema = z.strictObject({
  role: z.enum(["system", "user", "assistant", "tool", "ipython"]),
  content: z.string(),
  tool_calls: z.array(toolCall).optional(),
  name: z.string().optional(),
  tool_call_id: z.string().optional(),
});

export const taskRowSchema = z.object({
  data_source: z.string(),
  agent_name: z.string(),
  prompt: z.array(chatMessageSchema).min(1),
  ability: z.string().optional(),
  reward_model: z.strictObject({ style: z.literal("rule"), ground_truth: z.string() }),
  extra_info: z.looseObject({
    split: z.string(),
    index: z.number().int().min(0),
    question: z.string().optional(),
    answer: z.string().optional(),
  }),
  env_kwargs: z.string().optional(),
});

/** The row typed, or BadRow naming the first field at fault. */
export function checkTaskRow(value: unknown): TaskRow {
  const r = taskRowSchema.safeParse(value);
  if (r.success) return r.data as TaskRow;
  const issue = r.error.issues[0];
  throw new BadRow(`${issue.path.length ? issue.path.join(".") : "row"}: ${issue.message}`);
}
