/**
 * What a thrown value says: by default its first line, at most 1,000 characters; with `whole`, all
 * of it (a tool's error is the model's observation, which its own limit cuts). Never throws: it
 * tries the value's own text, then its `message`, then its tag, and gives up with "[an unprintable value]".
 */
export function describeThrown(e: unknown, whole = false): string {
  const ways = [
    () => (e instanceof Error ? e.message : String(e)),
    () => {
      const m = (e as { message?: unknown }).message;
      if (typeof m !== "string") throw new TypeError("no message");
      return m;
    },
    () => Object.prototype.toString.call(e),
  ];
  for (const way of ways) {
    try {
      const text = way();
      if (typeof text === "string") {
        if (whole) return text;
        const line = text.split("\n")[0];
        return line.length > 1000 ? `${line.slice(0, 1000)}...` : line;
      }
    } catch {
      // the next way
    }
  }
  return "[an unprintable value]";
}
