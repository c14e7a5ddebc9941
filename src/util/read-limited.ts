/**
 * Reading the body of a fetch Response within a byte limit, for every client of a server we do not
 * control (the Tinker client, the `engine.sampler` clients). `res.text()` and `res.arrayBuffer()`
 * read whatever comes, so an endless answer would grow the process until it dies; this reads the
 * body as a stream, counts the bytes as they arrive and cancels the stream (closing the connection)
 * once the count passes the limit. A Content-Length over the limit is refused before any read.
 *
 * The count is of decoded bytes: fetch undoes a Content-Encoding (gzip, deflate, br) before the
 * stream hands the bytes over, so a small compressed answer that inflates past the limit (a "gzip
 * bomb") stops at the limit too. That is also why a Content-Length is only trusted up front when
 * the body is not encoded: it counts the compressed bytes.
 *
 * Also here: the start of an error answer (its message, the rest unread), and where a redirect
 * points (the clients never follow one: their credentials would go along).
 */

/** What is known when a body passes its limit: the bytes read so far (or the declared length). */
export interface OverLimit {
  limit: number;
  /** Bytes counted when the read stopped; for a refused Content-Length, that length. */
  bytes: number;
  /** Whether the server declared the length up front (nothing was read). */
  declared: boolean;
}

/**
 * The body of `res` as bytes, at most `limit` of them. Past it, the body is cancelled and the error
 * `tooLarge` makes is thrown (each client words it with its server and request).
 */
export async function readLimited(
  res: Response,
  limit: number,
  tooLarge: (over: OverLimit) => Error,
): Promise<Uint8Array> {
  const declared = declaredLength(res);
  if (declared !== undefined && declared > limit) {
    await res.body?.cancel().catch(() => undefined);
    throw tooLarge({ limit, bytes: declared, declared: true });
  }
  if (!res.body) return new Uint8Array(0);
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > limit) {
      await reader.cancel().catch(() => undefined);
      throw tooLarge({ limit, bytes: total, declared: false });
    }
    chunks.push(value);
  }
  return concat(chunks, total);
}

/** The body as text (UTF-8), within the limit. */
export async function readLimitedText(
  res: Response,
  limit: number,
  tooLarge: (over: OverLimit) => Error,
): Promise<string> {
  return new TextDecoder().decode(await readLimited(res, limit, tooLarge));
}

/** Content-Length when it counts the bytes the stream will hand over (no Content-Encoding). */
function declaredLength(res: Response): number | undefined {
  const encoding = (res.headers.get("content-encoding") ?? "identity").trim().toLowerCase();
  if (encoding !== "identity" && encoding !== "") return undefined;
  const raw = res.headers.get("content-length");
  if (raw === null || !/^\d+$/.test(raw.trim())) return undefined;
  return Number(raw.trim());
}

function concat(chunks: Uint8Array[], total: number): Uint8Array {
  if (chunks.length === 1) return chunks[0];
  const out = new Uint8Array(total);
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.byteLength;
  }
  return out;
}

/** Where a redirect answer points, resolved against the request: one line, at most 200 characters. */
export function redirectTarget(res: Response): string {
  const raw = res.headers.get("location");
  if (raw === null) return "(no Location header)";
  let target = raw;
  try {
    target = new URL(raw, res.url || undefined).href;
  } catch {
    // shown as sent
  }
  target = target.replace(/[\u0000-\u001f\u007f]/g, "?");
  return target.length > 200 ? `${target.slice(0, 200)}...` : target;
}

/** A byte count for a message: "256 MiB", "1.5 MiB", "512 KiB", "300 bytes". */
export function formatBytes(n: number): string {
  const unit = (size: number, name: string) => {
    const v = n / size;
    return `${Number.isInteger(v) ? v : v.toFixed(1)} ${name}`;
  };
  if (n >= 1 << 30) return unit(1 << 30, "GiB");
  if (n >= 1 << 20) return unit(1 << 20, "MiB");
  if (n >= 1 << 10) return unit(1 << 10, "KiB");
  return `${n} bytes`;
}

/** The first `limit` bytes of the body (an error answer's message); the rest is cancelled unread. */
export async function readPrefix(res: Response, limit: number): Promise<Uint8Array> {
  if (!res.body) return new Uint8Array(0);
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  while (total < limit) {
    const { done, value } = await reader.read();
    if (done) return concat(chunks, total);
    const keep = value.subarray(0, limit - total);
    chunks.push(keep);
    total += keep.byteLength;
  }
  await reader.cancel().catch(() => undefined);
  return concat(chunks, total);
}
