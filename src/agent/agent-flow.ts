/**
 * The base of agent flows: drives model <-> env and owns the token context.
 * Token in, token out: turn k+1's context is turn k's context, then the action
 * tokens exactly as sampled, then the observation delta tokenized once. A
 * subclass may rewrite the context between turns (`prepareContext`: drop or
 * shorten old tool responses, summarize); the rewritten context starts a new
 * segment of the trajectory. Subclasses wanting other control (branching,
 * sub-agents) override `run` and reuse the protected helpers.
 *
 * An env that throws (or breaks its contract) ends the trajectory as failed;
 * an engine error propagates, since no other trajectory could do better.
 */
import type { Engine } from "../engine/types.js";
import type { ToolSchema } from "../model/chat-template.js";
import { Rng } from "../util/rng.js";
import { renderMessages, type AgentMessage, type ChatSetup } from "./chat-setup.js";
import { checkDrift } from "./drift.js";
import { checkObservation, checkStepResult, type Action, type Env, type Observation, type StepResult } from "./env.js";
import { ChatTemplateError, EnvError } from "./errors.js";
import { resolveLoopOptions, type AgentLoopOptions, type ResolvedLoopOptions } from "./loop-options.js";
import { observationDeltaTokens } from "./observation-delta.js";
import { TrajectoryBuilder, type EndReason, type Trajectory, type TrajectoryError } from "./trajectory.js";

export interface RunMeta {
  id?: string;
  rowIndex?: number;
  sampleIndex?: number;
  /** Fixes the draws: turn t samples with a seed derived from (seed, t). */
  seed?: number;
}

export interface FlowState {
  turn: number;
  /** The conversation so far as messages (null when an observation was text or tokens). Read-only: return a rewrite instead. */
  messages: readonly AgentMessage[] | null;
  /** The context the next turn would sample from. */
  context: readonly number[];
  tools?: ToolSchema[];
}

/** A new context: messages rendered through the chat template, or tokens given outright. */
export type ContextRewrite = { messages: AgentMessage[]; tokens?: number[] };

const obsField = (o: Observation) =>
  o as { messages?: AgentMessage[]; text?: string; tokens?: number[]; prompt?: AgentMessage[] };
const messageOf = (err: unknown) => (err instanceof Error ? err.message : String(err));

/** The error the env threw (not our wrapper), with the stage it threw in. */
function failure(err: EnvError): TrajectoryError {
  const cause = err.cause instanceof Error ? err.cause : err;
  return { stage: err.stage, name: cause.name, message: cause === err ? err.message : cause.message };
}

export abstract class AgentFlow<Row = unknown> {
  readonly options: ResolvedLoopOptions;

  constructor(
    readonly engine: Engine,
    readonly chat: ChatSetup,
    options: AgentLoopOptions = {},
  ) {
    this.options = resolveLoopOptions(options);
  }

  /** Between turns: return a rewritten context to start a new segment, or nothing to keep extending. */
  protected abstract prepareContext(state: FlowState): ContextRewrite | undefined | Promise<ContextRewrite | undefined>;

  async run(env: Env<Row>, row: Row, meta: RunMeta = {}): Promise<Trajectory> {
    const rec = new TrajectoryBuilder(meta.id ?? "t0", meta.rowIndex ?? 0, meta.sampleIndex ?? 0);
    let t: Trajectory;
    try {
      t = await this.turns(env, row, meta, rec);
    } catch (err) {
      if (!(err instanceof EnvError)) throw err;
      t = rec.finish("failed", { error: failure(err) });
    }
    try {
      await env.close?.();
    } catch (err) {
      if (t.endReason !== "failed")
        t = { ...t, endReason: "failed", error: failure(new EnvError("close", messageOf(err), err)) };
    }
    return t;
  }

  private async turns(env: Env<Row>, row: Row, meta: RunMeta, rec: TrajectoryBuilder): Promise<Trajectory> {
    const o = this.options;
    const first = await this.resetEnv(env, row);
    const tools = env.tools;
    const opening = obsField(first).messages ?? obsField(first).prompt;
    let messages = opening ? [...opening] : null;
    let context = this.firstContext(first, tools);
    if (context.length >= o.maxTotalTokens)
      throw new EnvError(
        "reset",
        `the first observation is ${context.length} tokens, at or over maxTotalTokens ${o.maxTotalTokens}`,
      );
    let end: EndReason | undefined;
    let tail = { tokens: context, closed: false, endsWithObservation: true };
    for (let turn = 0; end === undefined; turn++) {
      const { action, sampleMs } = await this.sampleAction(
        context,
        Math.min(o.maxTokensPerTurn, o.maxTotalTokens - context.length),
        turn,
        meta.seed,
      );
      const t0 = performance.now();
      const result = await this.stepEnv(env, action);
      const envMs = performance.now() - t0;
      const closed = action.tokens[action.tokens.length - 1] === this.chat.endOfTurnId;
      end = result.done ? "done" : turn + 1 >= o.maxTurns ? "max_turns" : undefined;
      let observation: number[] = [];
      const rebuilt = obsField(result.observation).prompt;
      if (end === undefined && !rebuilt) {
        observation = this.observationTokens(result.observation, messages, tools, closed);
        // No room left for another turn: nobody would sample from this observation.
        if (context.length + action.tokens.length + observation.length >= o.maxTotalTokens)
          [observation, end] = [[], "max_total_tokens"];
      }
      const { toolCalls = [], ...info } = result.info;
      rec.add(context, {
        action: action.tokens,
        logprobs: action.logprobs,
        stopReason: action.stopReason,
        observation,
        reward: result.reward,
        done: result.done,
        toolCalls,
        info,
        timing: { sampleMs, envMs },
        ...(action.policyVersion !== undefined ? { policyVersion: action.policyVersion } : {}),
      });
      if (messages) {
        messages.push(env.assistantMessage?.(action) ?? { role: "assistant", content: action.text });
        const obsMessages = obsField(result.observation).messages;
        if (end === undefined) messages = obsMessages ? [...messages, ...obsMessages] : null;
      }
      tail = { tokens: [...context, ...action.tokens, ...observation], closed, endsWithObservation: end === undefined };
      if (end !== undefined) break;
      context = tail.tokens;
      // The env rebuilt the prompt: the next turn starts a new segment from it (a flow may still rewrite it).
      const rewrite =
        (await this.prepareContext({ turn, messages, context, tools })) ?? (rebuilt && { messages: [...rebuilt] });
      if (rewrite) {
        messages = [...rewrite.messages];
        context = rewrite.tokens ? rewrite.tokens.slice() : this.firstContext({ messages }, tools);
        tail = { tokens: context, closed: false, endsWithObservation: true };
        if (context.length >= o.maxTotalTokens) end = "max_total_tokens";
      }
    }
    if (!o.driftCheck || !messages) return rec.finish(end);
    try {
      return rec.finish(end, {
        drift: checkDrift(this.chat, {
          messages,
          tools,
          tokens: tail.tokens,
          endsWithObservation: tail.endsWithObservation,
          actionClosed: tail.closed,
        }),
      });
    } catch (err) {
      // A metric only: a template that refuses the structured conversation (e.g. one call per turn at most) must not fail the rollout.
      if (err instanceof ChatTemplateError) return rec.finish(end, { driftError: err.message });
      throw err;
    }
  }

  /** Context tokens of a first observation: messages (or a prompt) rendered with the generation prompt, text encoded, tokens as given. */
  protected firstContext(obs: Observation, tools?: ToolSchema[]): number[] {
    const f = obsField(obs);
    if (f.tokens) return f.tokens.slice();
    if (f.text !== undefined) return this.chat.tokenizer.encode(f.text);
    const messages = f.messages ?? f.prompt!;
    return this.chat.tokenizer.encode(renderMessages(this.chat, messages, { tools, addGenerationPrompt: true }));
  }

  /** Tokens appended after an action for an observation (messages go through the chat template's delta). */
  protected observationTokens(
    obs: Observation,
    history: AgentMessage[] | null,
    tools: ToolSchema[] | undefined,
    actionClosed: boolean,
  ): number[] {
    const f = obsField(obs);
    if (f.tokens) return f.tokens.slice();
    if (f.text !== undefined) return this.chat.tokenizer.encode(f.text);
    return observationDeltaTokens(this.chat, { history: history ?? [], messages: f.messages!, tools, actionClosed });
  }

  protected async sampleAction(
    context: number[],
    maxTokens: number,
    turn: number,
    seed?: number,
  ): Promise<{ action: Action; sampleMs: number }> {
    const o = this.options;
    const t0 = performance.now();
    const res = await this.engine.sample(context, {
      n: 1,
      maxTokens,
      temperature: o.temperature,
      topP: o.topP,
      topK: o.topK,
      stop: o.stop ?? [this.chat.endOfTurnId],
      ...(seed !== undefined ? { seed: new Rng(seed, turn).int(0x7fffffff) } : {}),
    });
    const seq = res.sequences[0];
    if (!seq || seq.logprobs.length !== seq.tokens.length)
      throw new Error("internal: the engine returned no sequence, or logprobs not matching its tokens");
    const closed = seq.tokens[seq.tokens.length - 1] === this.chat.endOfTurnId;
    const text = this.chat.tokenizer.decode(closed ? seq.tokens.slice(0, -1) : seq.tokens);
    return {
      action: {
        tokens: seq.tokens,
        logprobs: seq.logprobs,
        text,
        stopReason: seq.stopReason,
        turn,
        ...(seq.policyVersion !== undefined ? { policyVersion: seq.policyVersion } : {}),
      },
      sampleMs: performance.now() - t0,
    };
  }

  protected async resetEnv(env: Env<Row>, row: Row): Promise<Observation> {
    let obs: unknown;
    try {
      obs = await env.reset(row);
    } catch (err) {
      throw err instanceof EnvError ? err : new EnvError("reset", messageOf(err), err);
    }
    return checkObservation(obs, "reset");
  }

  protected async stepEnv(env: Env<Row>, action: Action): Promise<StepResult> {
    let result: unknown;
    try {
      result = await env.step(action);
    } catch (err) {
      throw err instanceof EnvError ? err : new EnvError("step", messageOf(err), err);
    }
    return checkStepResult(result);
  }
}
