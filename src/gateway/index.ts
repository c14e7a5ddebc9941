/** `agent-r1/gateway`: train the agents people already have (the recording gateway and its rollouts). */
export { Gateway, type GatewayOptions, type EpisodeHandle } from "./gateway.js";
export { EpisodeRecorder, RecorderError, type RecorderOptions, type Completion } from "./episode-recorder.js";
export {
  agentRollout,
  type Agent,
  type AgentContext,
  type AgentOutcome,
  type AgentRolloutOptions,
  type AgentRolloutResult,
} from "./agent-rollout.js";
