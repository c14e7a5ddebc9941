/**
 * A tool with a process reward: looks a title up in an in-memory corpus and
 * earns 0.1 when the passage it returns contains the row's ground truth.
 * `ctx.signal` is passed on so a slow backend stops when the call times out.
 */
import { z } from "zod";
import { defineTool } from "agent-r1/agent";

export const CORPUS: Record<string, string> = {
  Kalomi: "Kalomi is a river town founded by Ada Brenn in 1871.",
  "Ada Brenn": "Ada Brenn (1840-1902) was born in Lusk and founded Kalomi.",
  Lusk: "Lusk is a village on the Orra river.",
};

async function fetchPassage(title: string, signal: AbortSignal): Promise<string | undefined> {
  signal.throwIfAborted(); // a real backend would pass the signal to fetch()
  return CORPUS[title];
}

export const lookup = defineTool({
  name: "lookup",
  description: "Returns the encyclopedia passage for an exact title.",
  inputSchema: z.object({ title: z.string().min(1).describe("Exact title, e.g. 'Kalomi'.") }),
  timeoutMs: 5_000,
  maxResponseChars: 2_000,
  async execute({ title }, ctx) {
    const passage = await fetchPassage(title, ctx.signal);
    if (passage === undefined) return `No passage titled '${title}'. Titles: ${Object.keys(CORPUS).join(", ")}.`;
    const truth = typeof ctx.groundTruth === "string" ? ctx.groundTruth : undefined;
    return { text: passage, reward: truth && passage.includes(truth) ? 0.1 : 0, metadata: { title } };
  },
});
