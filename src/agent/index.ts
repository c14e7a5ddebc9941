/** The agent runtime: tools, tool-call formats, envs, the agent loop, trajectories and batched rollouts. */
export {
  defineTool,
  toolSchema,
  truncateResponse,
  DEFAULT_TOOL_TIMEOUT_MS,
  DEFAULT_MAX_RESPONSE_CHARS,
} from "./tool.js";
export type { Tool, AnyTool, ToolContext, ToolOutput, ToolDefinition } from "./tool.js";
export { runToolCall, countToolErrors, TOOL_ERROR_KINDS } from "./tool-runner.js";
export type { ToolCallRecord, ToolErrorKind, CallContext } from "./tool-runner.js";
export type { ToolCallFormat, ParsedToolCall, ParsedAction, ToolResultText } from "./formats/types.js";
export { hermesFormat, createHermesFormat, type HermesOptions } from "./formats/hermes.js";
export { llama3JsonFormat } from "./formats/llama3.js";
export { chatSetup, renderMessages } from "./chat-setup.js";
export type { AgentMessage, ChatSetup, ChatSetupOptions } from "./chat-setup.js";
export { checkObservation, checkStepResult } from "./env.js";
export type { Env, EnvFactory, Observation, Action, StepResult, StepInfo } from "./env.js";
export { ToolEnv, DEFAULT_ANSWER_PATTERN } from "./tool-env.js";
export type { ToolEnvOptions, OutcomeInput } from "./tool-env.js";
export { observationDeltaText, observationDeltaTokens, ASSISTANT_SENTINEL } from "./observation-delta.js";
export type { DeltaInput } from "./observation-delta.js";
export { checkDrift, compareTokens, renderForDrift } from "./drift.js";
export type { DriftReport, DriftInput } from "./drift.js";
export { AgentFlow } from "./agent-flow.js";
export type { FlowState, ContextRewrite, RunMeta } from "./agent-flow.js";
export { AgentLoop } from "./agent-loop.js";
export type { FlowTurn, FlowRequest } from "./flow-state.js";
export { CompactionFlow, COMPACTION_TURN, type CompactionFlowOptions } from "./compaction-flow.js";
export { resolveCompaction, COMPACTION_DEFAULTS, type CompactionOptions } from "./compaction-options.js";
export { compactedContext, keptTurns, type CompactedContext } from "./compacted-context.js";
export { LOOP_DEFAULTS, type AgentLoopOptions } from "./loop-options.js";
export { TrajectoryBuilder, stepContext, finalTokens, segments } from "./trajectory.js";
export type { Trajectory, TrajectoryStep, TrajectoryMetrics, TrajectoryError, EndReason } from "./trajectory.js";
export { decodeTrajectory, formatTrajectory } from "./trajectory-view.js";
export type { DecodedTrajectory, DecodedStep } from "./trajectory-view.js";
export { rollout } from "./rollout.js";
export type { RolloutOptions, RolloutResult } from "./rollout.js";
export { rolloutMetrics, type RolloutMetrics } from "./rollout-metrics.js";
export { ChatTemplateError, EnvError } from "./errors.js";
