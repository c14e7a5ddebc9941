/**
 * The rows and reward the trained-agent examples share: small sums and products, answered with
 * the help of two tools. Rows are plain objects: an agent module may use any row shape it likes.
 */
export interface ArithmeticRow {
  question: string;
  answer: number;
}

export const rows: ArithmeticRow[] = [
  [3, 4, "+"],
  [12, 30, "+"],
  [6, 7, "*"],
  [9, 8, "*"],
  [25, 17, "+"],
  [11, 12, "*"],
].map(([a, b, op]) => ({
  question: `What is ${a} ${op === "+" ? "plus" : "times"} ${b}? Reply with the number only.`,
  answer: op === "+" ? Number(a) + Number(b) : Number(a) * Number(b),
}));

export const SYSTEM = "You are a careful calculator. Use the tools for arithmetic, then reply with the number.";

/** 1 when the reply's last number is the answer. */
export function reward(row: ArithmeticRow, reply: string | undefined | null): number {
  const numbers = (reply ?? "").match(/-?\d+/g);
  return numbers && Number(numbers[numbers.length - 1]) === row.answer ? 1 : 0;
}
