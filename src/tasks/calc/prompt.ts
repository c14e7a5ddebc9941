/** The calculator task's system prompt: short, for a tiny model. */
export const CALC_SYSTEM_PROMPT =
  "Solve the problem with the calculator tool. Each turn: <think>...</think>, then one <tool_call>...</tool_call> or the final <answer>...</answer> holding only the number.";
