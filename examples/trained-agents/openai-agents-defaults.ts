/**
 * An agent written with the OpenAI Agents SDK's defaults: the default client set once with
 * `setDefaultOpenAIClient`, and the SDK's default model, which speaks the Responses API. The client
 * is made from the first episode's address and kept for every episode, as a program sets it once at
 * start: the trainer sends each run's requests to its own episode all the same.
 */
import { Agent, run, setDefaultOpenAIClient, setTracingDisabled, tool } from "@openai/agents";
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

let client: OpenAI | undefined;

export async function agent(row: ArithmeticRow, ctx: AgentContext) {
  if (!client) {
    client = new OpenAI({ baseURL: ctx.baseURL, apiKey: ctx.apiKey });
    setDefaultOpenAIClient(client);
  }
  const calculator = new Agent({
    name: "calculator",
    instructions: SYSTEM,
    tools: [add],
    model: ctx.model,
    modelSettings: { maxTokens: 48 },
  });
  const result = await run(calculator, row.question, { maxTurns: 4, signal: ctx.signal });
  return reward(row, typeof result.finalOutput === "string" ? result.finalOutput : undefined);
}
