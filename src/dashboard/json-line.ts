/**
 * One line of a JSON-lines file as a JSON object. Lines nested deeper than MAX_JSON_DEPTH are
 * refused like malformed ones: JSON.parse accepts `[[[[...]]]]` 100,000 deep, but serializing it
 * again for a response overflows the stack, and one such line would make every answer a 500.
 */

/** Arrays and objects inside one another; the trainer's records nest a handful deep. */
export const MAX_JSON_DEPTH = 64;

/** The object on the line, or undefined when it is not JSON, not an object, or too deep. */
export function parseJsonObject(text: string): Record<string, unknown> | undefined {
  if (tooDeep(text, MAX_JSON_DEPTH)) return undefined;
  try {
    const v: unknown = JSON.parse(text);
    return v !== null && typeof v === "object" && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** Whether brackets outside strings nest deeper than `max` (one linear scan, before parsing). */
function tooDeep(text: string, max: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c)
        i++; // backslash: skip the escaped character
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x5b || c === 0x7b) {
      if (++depth > max) return true;
    } else if (c === 0x5d || c === 0x7d) depth--;
  }
  return false;
}
