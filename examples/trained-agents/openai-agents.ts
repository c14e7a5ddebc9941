/**
 * An agent written with the OpenAI Agents SDK: an `Agent` with a function tool, run by `run`, on
 * the chat-completions model of an `openai` client pointed at the episode (tracing off: nothing
 * leaves the machine).
 */
import { Agent, OpenAIChatCompletionsModel, run, setTracingDisabled, tool } from "@openai/agents";
import OpenAI from "openai";
import { z } from "zod";
import type { AgentContext } from "agent-r1/gateway";
import { reward, rows, SYSTEM, type ArithmeticRow } from "./arithmetic.js";

export { rows };

setTracingDisabled(true);

const add = tool({
  name: "add",
  description: "Adds two numbers.",
  parameters: z.object({ a: z.number(), b: z.number() }),
  execute: async ({ a, b }) => String(a + b),
});

export async function agent(row: ArithmeticRow, ctx: AgentContext) {
  const client = new OpenAI({ baseURL: ctx.baseURL, apiKey: ctx.apiKey, maxRetries: 0 });
  const calculator = new Agent({
    name: "calculator",
    instructions: SYSTEM,
    tools: [add],
    model: new OpenAIChatCompletionsModel(client, ctx.model),
    modelSettings: { maxTokens: 48 },
  });
  const result = await run(calculator, row.question, { maxTurns: 4, signal: ctx.signal });
  return reward(row, typeof result.finalOutput === "string" ? result.finalOutput : undefined);
}
