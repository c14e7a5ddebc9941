/** Reading a JSON request body under a size limit, and writing JSON responses. */
import type { IncomingMessage, ServerResponse } from "node:http";
import { ApiError, badRequest } from "./errors.js";
import { responseTooLarge, type RequestLimits } from "./request-limits.js";

/** Default cap on a request body: 1 MiB. */
export const DEFAULT_BODY_LIMIT = 1 << 20;

function tooLarge(limit: number): ApiError {
  return new ApiError(413, `request body is larger than ${limit} bytes`, { code: "request_too_large" });
}

/**
 * 415 unless the body is declared `application/json` (charset, if given, utf-8). Browsers send
 * text/plain and form types cross-site without a CORS preflight; JSON needs one.
 */
export function requireJsonContentType(req: IncomingMessage): void {
  const declared = req.headers["content-type"];
  const [media, ...params] = (declared ?? "").split(";").map((p) => p.trim().toLowerCase());
  const charset = params
    .find((p) => p.startsWith("charset="))
    ?.slice("charset=".length)
    .replace(/^"(.*)"$/, "$1");
  if (media === "application/json" && (charset === undefined || charset === "utf-8" || charset === "utf8")) return;
  const got = declared === undefined ? "no Content-Type" : `Content-Type '${declared}'`;
  throw new ApiError(
    415,
    `the request body must be JSON sent with 'Content-Type: application/json' (charset utf-8 if any), got ${got}`,
    { code: "unsupported_media_type" },
  );
}

/** The parsed body; 415 unless declared JSON, 413 past `limit` bytes (checked on Content-Length first), 400 when it is not JSON. */
export async function readJsonBody(req: IncomingMessage, limit: number): Promise<unknown> {
  requireJsonContentType(req);
  const declared = Number(req.headers["content-length"]);
  if (Number.isFinite(declared) && declared > limit) throw tooLarge(limit);
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > limit) throw tooLarge(limit);
    chunks.push(chunk as Buffer);
  }
  const text = Buffer.concat(chunks).toString("utf8");
  if (text.trim() === "") throw badRequest("the request body is empty; send a JSON object");
  try {
    return JSON.parse(text);
  } catch (e) {
    throw badRequest(`the request body is not valid JSON: ${(e as Error).message}`);
  }
}

export function sendJson(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  sendText(res, status, JSON.stringify(body), headers);
}

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

function sendText(res: ServerResponse, status: number, data: string, headers: Record<string, string> = {}): void {
  res.writeHead(status, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(data), ...headers });
  res.end(data);
}
