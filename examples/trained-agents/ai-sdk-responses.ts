/**
 * An agent written with the Vercel AI SDK's default OpenAI provider: `createOpenAI` and
 * `openai(model)`, which speaks the Responses API, with `streamText` and two tools. Trained as it is.
 */
import { stepCountIs, streamText, tool } from "ai";
import { createOpenAI } from "@ai-sdk/openai";
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
  const openai = createOpenAI({ baseURL: ctx.baseURL, apiKey: ctx.apiKey });
  const result = streamText({
    model: openai(ctx.model),
    system: SYSTEM,
    prompt: row.question,
    tools,
    stopWhen: stepCountIs(4),
    maxOutputTokens: 48,
    abortSignal: ctx.signal,
  });
  return reward(row, await result.text);
}
