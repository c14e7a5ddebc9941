/**
 * What a flow sees of an episode between turns, and what it may answer with:
 * a turn of its own (`FlowRequest`: the model is asked something by the flow,
 * not by the env) or a new context (`ContextRewrite`). The turns are kept as
 * the token spans the context already holds, so a flow can assemble a new
 * context from them (and from the episode's first prompt) without
 * tokenizing anything again.
 */
import type { ToolSchema } from "../model/chat-template.js";
import type { AgentMessage } from "./chat-setup.js";

/** One turn whose tokens the current context holds: an action and the observation after it. */
export interface FlowTurn {
  /** The action exactly as sampled. */
  action: readonly number[];
  /** True when the action's last token is the end-of-turn token. */
  closed: boolean;
  /** The observation's tokens as the env's messages render after the action (never a flow's request). */
  observation: readonly number[];
  /** The assistant message, then the observation's messages (null when the conversation is not tracked as messages). */
  messages: readonly AgentMessage[] | null;
  /** On a turn the flow asked for: its request's name. That action never reached the env. */
  asked?: string;
}

export interface FlowState {
  turn: number;
  /** The conversation so far as messages (null when an observation was text or tokens). Read-only: return a rewrite instead. */
  messages: readonly AgentMessage[] | null;
  /** The context the next turn would sample from. */
  context: readonly number[];
  tools?: ToolSchema[];
  /** The episode's first context: its first messages rendered with the generation prompt (or its first text or tokens). */
  prompt: readonly number[];
  /** The episode's first messages (null when the first observation was text or tokens). */
  opening: readonly AgentMessage[] | null;
  /** The turns `context` holds after its start, oldest first (those a rewrite kept, then the new ones). */
  turns: readonly FlowTurn[];
}

/** A turn the flow asks the model for: its messages follow the env's observation (a user turn, say). */
export interface FlowRequest {
  /** Names the turn: its step's `info.flowTurn`, and `FlowTurn.asked`. */
  name: string;
  messages: AgentMessage[];
}

/**
 * A new context: messages rendered through the chat template, or tokens given outright (then
 * `turns` lists the earlier turns those tokens still hold as they were, for later rewrites).
 */
export type ContextRewrite = { messages: AgentMessage[]; tokens?: number[]; turns?: FlowTurn[] };
