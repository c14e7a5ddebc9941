/**
 * An agent written with the `openai` client's Responses API: `responses.create` streamed, function
 * tools, and each call's result sent back as a `function_call_output` item after
 * `previous_response_id`. Trained as it is.
 */
import OpenAI from "openai";
import type { AgentContext } from "agent-r1/gateway";
import { reward, rows, SYSTEM, type ArithmeticRow } from "./arithmetic.js";

export { rows };

const tools: OpenAI.Responses.FunctionTool[] = ["add", "multiply"].map((name) => ({
  type: "function",
  name,
  description: `${name === "add" ? "Adds" : "Multiplies"} two numbers.`,
  parameters: { type: "object", properties: { a: { type: "number" }, b: { type: "number" } }, required: ["a", "b"] },
  strict: false,
}));

export async function agent(row: ArithmeticRow, ctx: AgentContext) {
  const client = new OpenAI({ baseURL: ctx.baseURL, apiKey: ctx.apiKey, maxRetries: 0 });
  let input: OpenAI.Responses.ResponseInput = [{ role: "user", content: row.question }];
  let previous: string | undefined;
  for (let turn = 0; turn < 4; turn++) {
    const stream = client.responses.stream(
      { model: ctx.model, instructions: SYSTEM, input, tools, max_output_tokens: 48, previous_response_id: previous },
      { signal: ctx.signal },
    );
    const response = await stream.finalResponse();
    previous = response.id;
    const calls = response.output.filter((item) => item.type === "function_call");
    if (calls.length === 0) return reward(row, response.output_text);
    input = calls.map((call) => {
      let output: string;
      try {
        const { a, b } = JSON.parse(call.arguments) as { a: number; b: number };
        output = String(call.name === "add" ? a + b : a * b);
      } catch (e) {
        output = `Error: ${(e as Error).message}`;
      }
      return { type: "function_call_output", call_id: call.call_id, output };
    });
  }
  return 0;
}
