/** Reading a JSON request body under a size limit, and writing JSON responses. */
import type { IncomingMessage, ServerResponse } from "node:http";
import { ApiError, badRequest } from "./errors.js";

/** Default cap on a request body: 1 MiB. */
export const DEFAULT_BODY_LIMIT = 1 << 20;

function tooLarge(limit: number): ApiError {
  return new ApiError(413, `request body is larger than ${limit} bytes`, { code: "request_too_large" });
}

/** The parsed body; 413 past `limit` bytes (checked on Content-Length first), 400 when it is not JSON. */
export async function readJsonBody(req: IncomingMessage, limit: number): Promise<unknown> {
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

export function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const data = JSON.stringify(body);
  res.writeHead(status, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(data), ...headers });
  res.end(data);
}
