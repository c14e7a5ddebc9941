/**
 * Number answers (GSM8K-style). The rule, exactly:
 *  1. In the answer text, numbers are maximal runs matching
 *       -?\d+(?:,\d{3}(?!\d))*(?:\.\d+)?   ("1,234.50", "-3", "42.0")
 *     i.e. commas count only as thousands separators between digit groups
 *     ("1,23" is the two numbers 1 and 23).
 *  2. The LAST such number is the answer (Agent-R1 legacy GSM8K takes the last
 *     number inside <answer>), so "$1,200 in total" reads 1200.
 *  3. Commas are dropped and the rest is read as a decimal: "42.0" == "42" == "42.00".
 *  4. It matches the ground truth (read the same way) when |a - b| <= 1e-6 * max(1, |b|).
 */

const NUMBER = /-?\d+(?:,\d{3}(?!\d))*(?:\.\d+)?/g;

/** The last number in `text`, or undefined when there is none. */
export function extractNumber(text: string): number | undefined {
  const all = text.match(NUMBER);
  if (!all) return undefined;
  const value = Number(all[all.length - 1].replace(/,/g, ""));
  return Number.isFinite(value) ? value : undefined;
}

export function numbersMatch(a: number, b: number): boolean {
  return Math.abs(a - b) <= 1e-6 * Math.max(1, Math.abs(b));
}

/** 1 when the answer's last number equals the ground truth's last number. */
export function numberAnswerCorrect(answer: string | undefined, groundTruth: string): 0 | 1 {
  if (answer === undefined) return 0;
  const a = extractNumber(answer),
    b = extractNumber(groundTruth);
  return a !== undefined && b !== undefined && numbersMatch(a, b) ? 1 : 0;
}
