/**
 * An agent written with the plain `openai` client: a tool loop over chat completions. Trained as it
 * is with `agent-r1 train --config recipe.yaml` and `task.module: examples/trained-agents/openai-client.ts`:
 * the rollout hands it an episode's baseURL and apiKey, and it never knows it is being trained.
 */
import OpenAI from "openai";
import type { AgentContext } from "agent-r1/gateway";
import { reward, rows, SYSTEM, type ArithmeticRow } from "./arithmetic.js";

export { rows };

const tools: OpenAI.ChatCompletionTool[] = ["add", "multiply"].map((name) => ({
  type: "function",
  function: {
    name,
    description: `${name === "add" ? "Adds" : "Multiplies"} two numbers.`,
    parameters: { type: "object", properties: { a: { type: "number" }, b: { type: "number" } }, required: ["a", "b"] },
  },
}));

export async function agent(row: ArithmeticRow, ctx: AgentContext) {
  const client = new OpenAI({ baseURL: ctx.baseURL, apiKey: ctx.apiKey, maxRetries: 0 });
  const messages: OpenAI.ChatCompletionMessageParam[] = [
    { role: "system", content: SYSTEM },
    { role: "user", content: row.question },
  ];
  for (let turn = 0; turn < 4; turn++) {
    const res = await client.chat.completions.create(
      { model: ctx.model, messages, tools, max_tokens: 48 },
      { signal: ctx.signal },
    );
    const msg = res.choices[0].message;
    messages.push(msg);
    if (!msg.tool_calls?.length) return reward(row, msg.content);
    for (const call of msg.tool_calls) {
      if (call.type !== "function") continue;
      let content: string;
      try {
        const { a, b } = JSON.parse(call.function.arguments) as { a: number; b: number };
        content = String(call.function.name === "add" ? a + b : a * b);
      } catch (e) {
        content = `Error: ${(e as Error).message}`;
      }
      messages.push({ role: "tool", tool_call_id: call.id, content });
    }
  }
  return 0;
}
