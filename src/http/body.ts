/**
 * Reading a request body within a limit: a declared Content-Length past it is refused before a byte
 * is read, the stream is cut at the limit, and a zstd body (where the server takes one) is bounded
 * before it is inflated. A body the client stopped sending is an error of the request, not of the
 * server. JSON bodies need `Content-Type: application/json` (a browser cannot send that cross-site
 * without a CORS preflight).
 */
import type { IncomingMessage } from "node:http";
import { DecompressLimitError, zstdDecompress } from "../engine/remote/zstd.js";
import { HttpError } from "./errors.js";

const tooLarge = (limit: number, what = "is larger than") =>
  new HttpError(413, `the request body ${what} ${limit} bytes, this server's limit (bodyLimit)`, "request_too_large");

/** The body's media type, lower case without parameters ("" when none is declared). */
export function mediaType(req: IncomingMessage): string {
  return (req.headers["content-type"] ?? "").split(";")[0].trim().toLowerCase();
}

/**
 * The body's bytes, at most `limit` of them; with `zstd`, a `Content-Encoding: zstd` body is
 * decompressed (to at most `limit` bytes) and any other encoding but identity is a 415.
 */
export async function readBody(req: IncomingMessage, limit: number, opts: { zstd?: boolean } = {}): Promise<Buffer> {
  const declared = Number(req.headers["content-length"]);
  if (Number.isFinite(declared) && declared > limit) throw tooLarge(limit);
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const c of req) {
      size += (c as Buffer).length;
      if (size > limit) throw tooLarge(limit);
      chunks.push(c as Buffer);
    }
  } catch (e) {
    if (e instanceof HttpError) throw e;
    throw new HttpError(400, `the request body was cut off: ${(e as Error).message}`);
  }
  const bytes = Buffer.concat(chunks);
  if (!opts.zstd) return bytes;
  const encoding = (req.headers["content-encoding"] ?? "identity").toLowerCase();
  if (encoding === "identity") return bytes;
  if (encoding !== "zstd")
    throw new HttpError(415, `Content-Encoding '${encoding}' is not accepted (zstd is)`, "unsupported_media_type");
  try {
    // Bounded before it allocates: a frame declaring more than the limit is refused unread.
    return Buffer.from(await zstdDecompress(bytes, limit));
  } catch (e) {
    if (e instanceof DecompressLimitError) throw tooLarge(limit, "decompresses to more than");
    throw new HttpError(422, `the zstd body does not decompress: ${(e as Error).message}`);
  }
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
  throw new HttpError(
    415,
    `the request body must be JSON sent with 'Content-Type: application/json' (charset utf-8 if any), got ${got}`,
    "unsupported_media_type",
  );
}

/** `text` parsed as JSON; `status` (400 by default) when it is empty or not JSON. */
export function parseJson(text: string, status = 400): unknown {
  if (text.trim() === "") throw new HttpError(status, "the request body is empty; send a JSON object");
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new HttpError(status, `the request body is not valid JSON: ${(e as Error).message}`);
  }
}

/** The parsed body of a JSON route: 415 unless declared JSON, 413 past `limit` bytes, 400 when it is not JSON. */
export async function readJsonBody(req: IncomingMessage, limit: number): Promise<unknown> {
  requireJsonContentType(req);
  return parseJson((await readBody(req, limit)).toString("utf8"));
}
