/**
 * A string a client sent, as an error message quotes it: at most `max` characters, and on one line
 * (with a control character in it, it is shown JSON-quoted, so `\n` stays two characters). Error
 * messages are one line; an id or path from a request must not break that.
 */
export function shown(text: string, max = 80): string {
  const short = text.length > max ? `${text.slice(0, max)}...` : text;
  // eslint-disable-next-line no-control-regex
  if (!/[\u0000-\u001f\u007f\u2028\u2029]/.test(short)) return short;
  // JSON escapes the C0 controls; the two Unicode line separators it leaves as they are.
  return JSON.stringify(short)
    .replace(/\u2028/g, "\\u2028")
    .replace(/\u2029/g, "\\u2029");
}
