/**
 * The scripted expert for the multi-hop task: searches each entity of the
 * plan in turn (reading the real search results), calls the calculator when
 * the question needs arithmetic, then answers. Mistakes (rate 1 - quality):
 * "guess" answers at once (an entity of the question, or a number);
 * "one_search" stops after the first search and answers what it found there.
 */
import type { AnyTool } from "../../agent/tool.js";
import type { ChatMessage } from "../../model/chat-template.js";
import { calculate, calculatorTool } from "../calc/calculator-tool.js";
import { answerTurn, toolResult, toolTurn } from "../common/turns.js";
import type { Question } from "./questions.js";

export const MULTIHOP_MISTAKES = ["guess", "one_search"] as const;
export type MultihopMode = "expert" | (typeof MULTIHOP_MISTAKES)[number];

/** `search` gives the search tool's text for a query (the same function the tool runs). */
export function multihopExpertTurns(
  q: Question,
  mode: MultihopMode,
  searchTool: AnyTool,
  search: (query: string) => string,
): ChatMessage[] {
  if (mode === "guess") return [answerTurn(`I guess ${q.blindGuess}.`, q.blindGuess)];
  const out: ChatMessage[] = [];
  const searches = mode === "one_search" ? q.searches.slice(0, 1) : q.searches;
  searches.forEach((query, i) =>
    out.push(toolTurn(q.thoughts[i], searchTool.name, { query }), toolResult(searchTool, search(query))),
  );
  if (mode === "one_search") return [...out, answerTurn(`I think it is ${q.firstHopGuess}.`, q.firstHopGuess)];
  if (q.expression !== undefined) {
    const result = calculate(q.expression);
    if (result !== q.answer)
      throw new Error(`internal: ${q.expression} = ${result}, but the answer of '${q.question}' is ${q.answer}`);
    out.push(
      toolTurn(q.thoughts[searches.length], calculatorTool.name, { expression: q.expression }),
      toolResult(calculatorTool, result),
    );
  }
  return [...out, answerTurn(q.thoughts[q.thoughts.length - 1], q.answer)];
}
