/**
 * A tool: a calculator over + - * / and parentheses (no eval). A syntax error
 * throws, and the runtime turns it into an error observation the model reads.
 */
import { z } from "zod";
import { defineTool } from "agent-r1/agent";

/** Recursive descent: expr = term (("+" | "-") term)*, term = factor (("*" | "/") factor)*, factor = number | "-" factor | "(" expr ")". */
export function evaluate(expression: string): number {
  const src = expression.replace(/\s+/g, "");
  let at = 0;
  const fail = (what: string): never => {
    throw new Error(`${what} at position ${at} of '${expression}'`);
  };
  const factor = (): number => {
    if (src[at] === "-") return (at++, -factor());
    if (src[at] === "(") {
      at++;
      const v = expr();
      if (src[at++] !== ")") fail("expected ')'");
      return v;
    }
    const m = /^\d+(\.\d+)?/.exec(src.slice(at));
    if (!m) return fail("expected a number");
    at += m[0].length;
    return Number(m[0]);
  };
  const term = (): number => {
    let v = factor();
    while (src[at] === "*" || src[at] === "/") v = src[at++] === "*" ? v * factor() : v / factor();
    return v;
  };
  const expr = (): number => {
    let v = term();
    while (src[at] === "+" || src[at] === "-") v = src[at++] === "+" ? v + term() : v - term();
    return v;
  };
  const v = expr();
  if (at !== src.length) fail("unexpected character");
  return v;
}

export const calculator = defineTool({
  name: "calculator",
  description: "Evaluates an arithmetic expression with + - * / and parentheses, e.g. 12 * (3 + 4).",
  inputSchema: z.object({ expression: z.string().max(200).describe("The expression to evaluate.") }),
  timeoutMs: 1_000,
  execute: ({ expression }) => String(evaluate(expression)),
});
