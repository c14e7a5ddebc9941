/** JSON text helpers for tool-call formats: finding where an object ends, and writing JSON the way chat templates do. */

/** Index just past the `}` closing the object that opens at `start`, or -1 when it never closes. */
export function scanJsonObject(text: string, start: number): number {
  if (text[start] !== "{") return -1;
  let depth = 0;
  let inString = false;
  for (let i = start; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      if (c === "\\") i++;
      else if (c === '"') inString = false;
    } else if (c === '"') inString = true;
    else if (c === "{" || c === "[") depth++;
    else if (c === "}" || c === "]") {
      depth--;
      if (depth === 0) return c === "}" ? i + 1 : -1;
    }
  }
  return -1;
}

/** JSON with Python's json.dumps separators (", " and ": "), which Jinja's tojson uses in chat templates. */
export function templateJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(templateJson).join(", ")}]`;
  if (typeof value === "object" && value !== null) {
    const parts = Object.entries(value)
      .filter(([, v]) => v !== undefined)
      .map(([k, v]) => `${JSON.stringify(k)}: ${templateJson(v)}`);
    return `{${parts.join(", ")}}`;
  }
  return JSON.stringify(value) ?? "null";
}
