/** System prompts of the search tasks: short, for a tiny model. */
export const MULTIHOP_SYSTEM_PROMPT =
  "Answer the question with the search and calculator tools. Each turn: <think>...</think>, then one <tool_call>...</tool_call> or the final <answer>...</answer> holding only a name or a number.";

/** For rows with only the search tool (HotpotQA). */
export const SEARCH_SYSTEM_PROMPT =
  "Answer the question with the search tool. Each turn: <think>...</think>, then one <tool_call>...</tool_call> or the final <answer>...</answer> holding only the short answer.";
