/**
 * An agent written with LangGraph: the prebuilt ReAct agent (`createReactAgent`) over LangChain's
 * `ChatOpenAI`, with two tools. Trained as it is.
 */
import { createReactAgent } from "@langchain/langgraph/prebuilt";
import { ChatOpenAI } from "@langchain/openai";
import { tool } from "@langchain/core/tools";
import { z } from "zod";
import type { AgentContext } from "agent-r1/gateway";
import { reward, rows, SYSTEM, type ArithmeticRow } from "./arithmetic.js";

export { rows };
const pair = z.object({ a: z.number(), b: z.number() });
const tools = [
  tool(async ({ a, b }) => String(a + b), { name: "add", description: "Adds two numbers.", schema: pair }),
  tool(async ({ a, b }) => String(a * b), { name: "multiply", description: "Multiplies two numbers.", schema: pair }),
];

export async function agent(row: ArithmeticRow, ctx: AgentContext) {
  const llm = new ChatOpenAI({
    model: ctx.model,
    apiKey: ctx.apiKey,
    configuration: { baseURL: ctx.baseURL },
    maxTokens: 48,
  });
  const graph = createReactAgent({ llm, tools, prompt: SYSTEM });
  const state = await graph.invoke(
    { messages: [{ role: "user", content: row.question }] },
    { recursionLimit: 8, signal: ctx.signal },
  );
  const last = state.messages[state.messages.length - 1];
  return reward(row, typeof last?.content === "string" ? last.content : undefined);
}
