/**
 * An agent written with the Vercel AI SDK (`generateText`, two tools, `stopWhen`): trained as it is.
 * The only line that knows about training is the provider's baseURL.
 */
import { generateText, stepCountIs, tool } from "ai";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { z } from "zod";
import type { AgentContext } from "agent-r1/gateway";
import { reward, rows, SYSTEM, type ArithmeticRow } from "./arithmetic.js";

export { rows };
const pair = z.object({ a: z.number(), b: z.number() });
const tools = {
  add: tool({ description: "Adds two numbers.", inputSchema: pair, execute: async ({ a, b }) => String(a + b) }),
  multiply: tool({
    description: "Multiplies two numbers.",
    inputSchema: pair,
    execute: async ({ a, b }) => String(a * b),
  }),
};

export async function agent(row: ArithmeticRow, ctx: AgentContext) {
  const policy = createOpenAICompatible({ name: "policy", baseURL: ctx.baseURL, apiKey: ctx.apiKey });
  const { text } = await generateText({
    model: policy(ctx.model),
    system: SYSTEM,
    prompt: row.question,
    tools,
    stopWhen: stepCountIs(4),
    maxOutputTokens: 48,
    abortSignal: ctx.signal,
  });
  return reward(row, text);
}
