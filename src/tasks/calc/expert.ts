/**
 * The scripted expert for the calculator task. Expert: one calculator call
 * with the whole expression, then the result as the answer. Mistakes (rate
 * 1 - quality): "guess" answers at once with a number from the question;
 * "slip" computes an expression missing a step and answers its result.
 */
import type { ChatMessage } from "../../model/chat-template.js";
import type { Rng } from "../../util/rng.js";
import { answerTurn, toolResult, toolTurn } from "../common/turns.js";
import { calculate, calculatorTool } from "./calculator-tool.js";
import type { CalcProblem } from "./problems.js";

export const CALC_MISTAKES = ["guess", "slip"] as const;
export type CalcMode = "expert" | (typeof CALC_MISTAKES)[number];

function solveWith(expression: string): ChatMessage[] {
  const result = calculate(expression);
  return [
    toolTurn(`I need ${expression}.`, calculatorTool.name, { expression }),
    toolResult(calculatorTool, result),
    answerTurn(`The result is ${result}.`, result),
  ];
}

/** The assistant and tool messages after the prompt. */
export function calcExpertTurns(p: CalcProblem, mode: CalcMode, rng: Rng): ChatMessage[] {
  if (mode === "expert") return solveWith(p.expression);
  if (mode === "slip") return solveWith(p.slip);
  const guess = String(p.numbers[rng.int(p.numbers.length)]);
  return [answerTurn(`I guess ${guess}.`, guess)];
}
