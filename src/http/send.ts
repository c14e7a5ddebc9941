/** Writing a whole response: JSON (with its length), or bytes of a given type. */
import type { ServerResponse } from "node:http";

export function sendJson(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  sendText(res, status, JSON.stringify(body), headers);
}

/** `data` (already JSON) as an application/json response. */
export function sendText(
  res: ServerResponse,
  status: number,
  data: string,
  headers: Record<string, string> = {},
): void {
  res.writeHead(status, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(data), ...headers });
  res.end(data);
}

export function sendBytes(res: ServerResponse, status: number, type: string, bytes: Uint8Array): void {
  res.writeHead(status, { "Content-Type": type, "Content-Length": bytes.byteLength });
  res.end(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength));
}
