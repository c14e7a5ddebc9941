/**
 * The environment interface (the agent MDP): `reset(row)` gives the first
 * observation, `step(action)` the next one with a reward and `done`.
 * Observations are exactly one of:
 *  - messages: chat messages, rendered through the chat template (on reset the
 *    whole prompt; on step only the new messages, appended as a token delta);
 *  - text: raw text appended as is (tokenized once);
 *  - tokens: token ids appended as is;
 *  - prompt: the whole next prompt, rebuilt from the env's state (task, current
 *    observation, history, admissible actions), rendered through the chat
 *    template with the generation prompt. Nothing is appended: the next turn
 *    samples from the new prompt alone, so each such step is its own segment
 *    (its own datum), as Agent-R1's ALFWorld and WebShop recipes build them.
 */
import type { StopReason } from "../engine/types.js";
import type { ToolSchema } from "../model/chat-template.js";
import type { AgentMessage } from "./chat-setup.js";
import type { ToolCallRecord } from "./tool-runner.js";
import { EnvError } from "./errors.js";

export type Observation =
  { messages: AgentMessage[] } | { text: string } | { tokens: number[] } | { prompt: AgentMessage[] };

/** One sampled assistant turn. */
export interface Action {
  /** Token ids exactly as sampled (the end-of-turn token included when the turn stopped on it). */
  tokens: number[];
  logprobs: number[];
  /** The tokens decoded, without a final end-of-turn token. */
  text: string;
  stopReason: StopReason;
  /** 0-based turn index. */
  turn: number;
  /** The policy version that sampled it, when the engine reported one (SampledSequence.policyVersion). */
  policyVersion?: number;
}

export interface StepInfo {
  toolCalls?: ToolCallRecord[];
  [key: string]: unknown;
}

export interface StepResult {
  observation: Observation;
  reward: number;
  done: boolean;
  info: StepInfo;
}

export interface Env<Row = unknown> {
  /** Function schemas for the chat template's `tools`. */
  readonly tools?: ToolSchema[];
  reset(row: Row): Observation | Promise<Observation>;
  step(action: Action): StepResult | Promise<StepResult>;
  /** The action as a chat message (structured tool calls), for the drift check and logs. Default: `{ role: "assistant", content: text }`. */
  assistantMessage?(action: Action): AgentMessage;
  close?(): void | Promise<void>;
}

/** Builds a fresh env for one trajectory (index = position in the rollout). */
export type EnvFactory<Row> = (row: Row, index: number) => Env<Row>;

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** Throws an EnvError naming the broken field; returns the observation typed. */
export function checkObservation(o: unknown, stage: "reset" | "step"): Observation {
  if (!isObject(o)) throw new EnvError(stage, `observation must be an object, got ${o === null ? "null" : typeof o}`);
  const keys = (["messages", "text", "tokens", "prompt"] as const).filter((k) => o[k] !== undefined);
  if (keys.length !== 1)
    throw new EnvError(
      stage,
      `observation must have exactly one of messages, text, tokens, prompt; got ${keys.length ? keys.join(", ") : "none"}`,
    );
  if (keys[0] === "messages" || keys[0] === "prompt") {
    const key = keys[0],
      ms = o[key];
    if (!Array.isArray(ms)) throw new EnvError(stage, `observation.${key} must be an array`);
    if (key === "prompt" && ms.length === 0)
      throw new EnvError(stage, "observation.prompt must hold at least one message");
    ms.forEach((m, i) => {
      if (!isObject(m) || typeof m.role !== "string" || typeof m.content !== "string") {
        throw new EnvError(stage, `observation.${key}[${i}] must be { role: string, content: string }`);
      }
    });
  } else if (keys[0] === "text") {
    if (typeof o.text !== "string") throw new EnvError(stage, "observation.text must be a string");
  } else if (!Array.isArray(o.tokens) || !o.tokens.every((t) => Number.isInteger(t) && t >= 0)) {
    throw new EnvError(stage, "observation.tokens must be an array of non-negative integer token ids");
  }
  return o as Observation;
}

export function checkStepResult(r: unknown): StepResult {
  if (!isObject(r))
    throw new EnvError(
      "step",
      `step must return { observation, reward, done, info }, got ${r === null ? "null" : typeof r}`,
    );
  checkObservation(r.observation, "step");
  if (typeof r.reward !== "number" || !Number.isFinite(r.reward))
    throw new EnvError("step", `reward must be a finite number, got ${String(r.reward)}`);
  if (typeof r.done !== "boolean") throw new EnvError("step", `done must be a boolean, got ${typeof r.done}`);
  if (!isObject(r.info)) throw new EnvError("step", "info must be an object");
  return r as unknown as StepResult;
}
