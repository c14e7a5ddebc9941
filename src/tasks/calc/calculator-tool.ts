/** The `calculator` tool: {"expression": string} -> the value as text (see calculator.ts for the grammar and limits). */
import { z } from "zod";
import { defineTool } from "../../agent/tool.js";
import { evaluateArithmetic, formatNumber, MAX_EXPRESSION_CHARS } from "./calculator.js";

/** The text the tool returns for an expression (throws InputError on anything but arithmetic). */
export function calculate(expression: string): string {
  return formatNumber(evaluateArithmetic(expression));
}

export const calculatorTool = defineTool({
  name: "calculator",
  description: "Evaluates arithmetic with + - * / and parentheses, e.g. 3 * (4 + 5).",
  inputSchema: z.strictObject({ expression: z.string().min(1).max(MAX_EXPRESSION_CHARS) }),
  timeoutMs: 1_000,
  maxResponseChars: 200,
  execute: ({ expression }) => calculate(expression),
});
