/**
 * The search coverage of a long-horizon episode: the share of the names a question lists that some
 * search asked for by that name (compared as answers are: rewards/qa.ts's normalization), each name
 * counted once however often it was searched. With the task option `coverageReward: w`, an episode
 * that ends by itself earns w × coverage on top of its outcome: a shaped reward for copying every
 * listed name into a query, which the outcome alone pays for only through the answer.
 */
import { normalizeAnswer } from "../../rewards/qa.js";

/** What coverage reads of a tool call: its tool's name and the arguments the model wrote. */
export interface SearchCall {
  name: string | null;
  arguments: Record<string, unknown> | null;
}

/** Listed names searched by name, over listed names (0 when nothing is listed). */
export function searchCoverage(listed: readonly string[], calls: readonly SearchCall[]): number {
  const wanted = new Set(listed.map(normalizeAnswer));
  if (wanted.size === 0) return 0;
  const found = new Set<string>();
  for (const c of calls) {
    const query = c.name === "search" ? c.arguments?.query : undefined;
    if (typeof query !== "string") continue;
    const q = normalizeAnswer(query);
    if (wanted.has(q)) found.add(q);
  }
  return found.size / wanted.size;
}
