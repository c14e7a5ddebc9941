/**
 * The request target of an HTTP request as a URL, or undefined when it is malformed. Servers
 * answer undefined with a 400: a bad target is the client's fault, not an internal error.
 */

/**
 * Accepts the origin form (`/path?query`) and the absolute form (`http://host/path`); anything
 * else (`*`, `//`, `http://[`, an empty target) is undefined. An origin-form target is read
 * against a fixed base, so `//evil.example/x` stays a path and never becomes a host.
 */
export function parseRequestTarget(target: string | undefined): URL | undefined {
  if (!target) return undefined;
  try {
    if (target.startsWith("/")) return new URL(`http://localhost${target}`);
    if (/^https?:\/\//i.test(target)) return new URL(target);
  } catch {
    // An invalid URL: fall through.
  }
  return undefined;
}

/** decodeURIComponent, or undefined for a malformed percent-encoding (`%E0%A4%A`, `%`). */
export function decodePathPart(part: string): string | undefined {
  try {
    return decodeURIComponent(part);
  } catch {
    return undefined;
  }
}
