/** Writing OpenAI-shaped responses within the response-size limit. */
import type { ServerResponse } from "node:http";
import { sendText } from "../http/send.js";
import { responseTooLarge, type RequestLimits } from "./request-limits.js";

export { sendJson } from "../http/send.js";
export { readJsonBody } from "../http/body.js";

/** Default cap on a request body: 1 MiB. */
export const DEFAULT_BODY_LIMIT = 1 << 20;

/**
 * A 200 `{...fields, "choices": [...], "usage": usage}` serialized one choice at a time, so a
 * response past maxResponseBytes is refused (a 413 thrown, nothing sent) before it is all in memory.
 */
export function sendChoices<T>(
  res: ServerResponse,
  limits: RequestLimits,
  fields: Record<string, unknown>,
  choices: readonly T[],
  render: (choice: T) => unknown,
  usage: unknown,
): void {
  const open = JSON.stringify(fields).slice(0, -1);
  const head = `${open}${open === "{" ? "" : ","}"choices":[`;
  const tail = `],"usage":${JSON.stringify(usage)}}`;
  let size = Buffer.byteLength(head) + Buffer.byteLength(tail);
  const parts: string[] = [];
  for (const c of choices) {
    const part = JSON.stringify(render(c));
    size += Buffer.byteLength(part) + (parts.length > 0 ? 1 : 0);
    if (size > limits.maxResponseBytes) throw responseTooLarge(limits);
    parts.push(part);
  }
  sendText(res, 200, head + parts.join(",") + tail);
}
