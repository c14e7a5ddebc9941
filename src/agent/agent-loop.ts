/**
 * The default agent loop: sample, step the env, append the action and the
 * observation delta, repeat until the env is done (ToolEnv: an answer, or a
 * turn without a tool call), `maxTurns`, or `maxTotalTokens`. It never
 * rewrites the context, so every trajectory is one segment.
 *
 * What the model writes cannot fail more than its own trajectory: when the
 * chat template cannot render an observation after the conversation so far
 * (a template that refuses a turn with several tool calls, or text that
 * collides with the delta's sentinel), the trajectory fails at stage "step"
 * with the template's message, like an env error, and the rollout goes on.
 */
import type { ToolSchema } from "../model/chat-template.js";
import { AgentFlow, type ContextRewrite, type FlowState } from "./agent-flow.js";
import type { AgentMessage } from "./chat-setup.js";
import type { Observation } from "./env.js";
import { ChatTemplateError, EnvError } from "./errors.js";

export class AgentLoop<Row = unknown> extends AgentFlow<Row> {
  protected prepareContext(_state: FlowState): ContextRewrite | undefined {
    return undefined;
  }

  protected override observationTokens(
    obs: Observation,
    history: AgentMessage[] | null,
    tools: ToolSchema[] | undefined,
    actionClosed: boolean,
  ): number[] {
    try {
      return super.observationTokens(obs, history, tools, actionClosed);
    } catch (err) {
      if (err instanceof ChatTemplateError)
        throw new EnvError("step", `the observation cannot be rendered after this conversation: ${err.message}`, err);
      throw err;
    }
  }
}
