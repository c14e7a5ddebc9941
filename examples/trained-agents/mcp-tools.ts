/**
 * A tool env whose tools come from an MCP server the recipe names. This module gives the rows, the
 * system prompt and the reward; the recipe's `task.mcp` starts the server once per run, and its
 * tools are the built-in ToolEnv's (no agent, no gateway):
 *
 *   task:
 *     module: ./mcp-tools.ts
 *     mcp:
 *       - command: npx                                 # the server runs in the recipe's directory
 *         args: [tsx, ./arithmetic-mcp-server.ts, stdio]
 *         include: [add, multiply]
 *
 * `reward` gets the row and the answer: the text inside <answer></answer>, else the last reply.
 */
import { reward as replyReward, rows, SYSTEM, type ArithmeticRow } from "./arithmetic.js";

export { rows };
export const system = SYSTEM;

export function reward(row: ArithmeticRow, answer: string | undefined): number {
  return replyReward(row, answer);
}
