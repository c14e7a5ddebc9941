/**
 * The default agent loop: sample, step the env, append the action and the
 * observation delta, repeat until the env is done (ToolEnv: an answer, or a
 * turn without a tool call), `maxTurns`, or `maxTotalTokens`. It never
 * rewrites the context, so every trajectory is one segment.
 */
import { AgentFlow, type ContextRewrite } from "./agent-flow.js";

export class AgentLoop<Row = unknown> extends AgentFlow<Row> {
  protected prepareContext(): ContextRewrite | undefined {
    return undefined;
  }
}
