/**
 * The base of agent flows: drives model <-> env and owns the token context.
 * Token in, token out: turn k+1's context is turn k's context, then the action
 * tokens exactly as sampled, then the observation delta tokenized once. A
 * subclass may rewrite the context between turns (`prepareContext`: drop or
 * shorten old tool responses, summarize); the rewritten context starts a new
 * segment of the trajectory. It may also ask the model for a turn of its own
 * after an env step (`request`: a summary, say): the request's messages are
 * rendered after the env's observation, and the action answering them is
 * sampled and recorded like any other but never reaches the env. Subclasses
 * wanting other control (branching, sub-agents) override `run` and reuse the
 * protected helpers.
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
import type { ContextRewrite, FlowRequest, FlowState, FlowTurn } from "./flow-state.js";
import { resolveLoopOptions, type AgentLoopOptions, type ResolvedLoopOptions } from "./loop-options.js";
import { observationDeltaTokens } from "./observation-delta.js";
import { TrajectoryBuilder, type EndReason, type Trajectory, type TrajectoryError } from "./trajectory.js";

export type { ContextRewrite, FlowRequest, FlowState, FlowTurn } from "./flow-state.js";

export interface RunMeta {
  id?: string;
  rowIndex?: number;
  sampleIndex?: number;
  /** Fixes the draws: turn t samples with a seed derived from (seed, t). */
  seed?: number;
}

/** The episode as the loop advances it. */
interface Episode {
  tools?: ToolSchema[];
  prompt: number[];
  opening: AgentMessage[] | null;
  /** The conversation so far as messages; null once an observation was text or tokens. */
  messages: AgentMessage[] | null;
  /** The context the next turn samples from, and the turns it holds. */
  context: number[];
  turns: FlowTurn[];
  /** The last context + action + observation (for the drift check). */
  tail: { tokens: number[]; closed: boolean; endsWithObservation: boolean };
  /** The flow's request the next turn answers. */
  asked?: FlowRequest;
}

/** A turn sampled and answered (by the env, or as the flow's own). */
interface Played {
  turn: number;
  action: Action;
  closed: boolean;
  result: StepResult;
  asked?: FlowRequest;
  timing: { sampleMs: number; envMs: number };
}

const obsField = (o: Observation) =>
  o as { messages?: AgentMessage[]; text?: string; tokens?: number[]; prompt?: AgentMessage[] };
const messageOf = (err: unknown) => (err instanceof Error ? err.message : String(err));

/** The error the env threw (not our wrapper), with the stage it threw in. */
function failure(err: EnvError): TrajectoryError {
  const cause = err.cause instanceof Error ? err.cause : err;
  return { stage: err.stage, name: cause.name, message: cause === err ? err.message : cause.message };
}

/** What `observe` appends after an action; `full`: no room for another turn unless the flow rewrites the context. */
interface Observed {
  observation: number[];
  end?: EndReason;
  full?: boolean;
}

/** What a turn the flow asked for gets instead of an env step: no reward, nothing observed, named in info. */
const answeredRequest = (r: FlowRequest): StepResult => ({
  observation: { messages: [] },
  reward: 0,
  done: false,
  info: { flowTurn: r.name },
});

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

  /**
   * After an env step the episode goes on from (observations as messages): a turn to ask the model
   * for, whose messages follow the observation, or nothing. `state.context` is the context the next
   * turn would sample from without the request. The turn answering it is not asked again, and
   * `prepareContext` runs after it (not before). Default: nothing.
   */
  protected request(_state: FlowState): FlowRequest | undefined {
    return undefined;
  }

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
    const ep = await this.openEpisode(env, row);
    let end: EndReason | undefined;
    for (let turn = 0; end === undefined; turn++) {
      const played = await this.play(env, ep, turn, meta.seed);
      const { result, action } = played;
      const limit = result.done ? "done" : turn + 1 >= this.options.maxTurns ? "max_turns" : undefined;
      const observed = this.observe(env, ep, played, limit);
      const { toolCalls = [], ...info } = result.info;
      rec.add(ep.context, {
        action: action.tokens,
        logprobs: action.logprobs,
        stopReason: action.stopReason,
        observation: observed.observation,
        reward: result.reward,
        done: result.done,
        toolCalls,
        info,
        timing: played.timing,
        ...(action.policyVersion !== undefined ? { policyVersion: action.policyVersion } : {}),
      });
      end = await this.advance(ep, played, observed);
    }
    return this.finishEpisode(ep, end, rec);
  }

  /** Resets the env: the first context (checked against maxTotalTokens) and messages. */
  private async openEpisode(env: Env<Row>, row: Row): Promise<Episode> {
    const first = await this.resetEnv(env, row);
    const tools = env.tools;
    const opening = obsField(first).messages ?? obsField(first).prompt;
    const context = this.firstContext(first, tools);
    if (context.length >= this.options.maxTotalTokens)
      throw new EnvError(
        "reset",
        `the first observation is ${context.length} tokens, at or over maxTotalTokens ${this.options.maxTotalTokens}`,
      );
    return {
      tools,
      prompt: context.slice(),
      opening: opening ? [...opening] : null,
      messages: opening ? [...opening] : null,
      context,
      turns: [],
      tail: { tokens: context, closed: false, endsWithObservation: true },
    };
  }

  /** Samples the turn's action; the env steps on it unless it answers the flow's request. */
  private async play(env: Env<Row>, ep: Episode, turn: number, seed?: number): Promise<Played> {
    const o = this.options;
    const room = Math.min(o.maxTokensPerTurn, o.maxTotalTokens - ep.context.length);
    const { action, sampleMs } = await this.sampleAction(ep.context, room, turn, seed);
    const asked = ep.asked;
    ep.asked = undefined;
    const t0 = performance.now();
    const result = asked ? answeredRequest(asked) : await this.stepEnv(env, action);
    const envMs = performance.now() - t0;
    const closed = action.tokens[action.tokens.length - 1] === this.chat.endOfTurnId;
    return { turn, action, closed, result, asked, timing: { sampleMs, envMs } };
  }

  /**
   * The tokens appended after the action (the observation delta, with the flow's request when it
   * asks one), and the conversation and turns advanced by them. Nothing is appended when the episode
   * ends, when no room is left for another turn, or when the env rebuilt its prompt.
   */
  private observe(env: Env<Row>, ep: Episode, p: Played, end: EndReason | undefined): Observed {
    const f = obsField(p.result.observation);
    const history = ep.messages;
    const assistant: AgentMessage = p.asked
      ? { role: "assistant", content: p.action.text }
      : (env.assistantMessage?.(p.action) ?? { role: "assistant", content: p.action.text });
    if (end !== undefined || f.prompt) {
      history?.push(assistant);
      if (end === undefined) ep.messages = null; // the rebuilt prompt replaces them
      return { observation: [], end };
    }
    const plain = this.observationTokens(p.result.observation, history, ep.tools, p.closed);
    const turnMessages = history && f.messages ? [assistant, ...f.messages] : null;
    const turn: FlowTurn = {
      action: p.action.tokens,
      closed: p.closed,
      observation: plain,
      messages: turnMessages,
      ...(p.asked ? { asked: p.asked.name } : {}),
    };
    const messages = turnMessages ? [...history!, ...turnMessages] : null;
    const next = [...ep.context, ...p.action.tokens, ...plain];
    const limit = this.options.maxTotalTokens - ep.context.length - p.action.tokens.length;
    let request =
      !p.asked && messages
        ? this.request({ ...this.flowState(ep, p.turn), messages, context: next, turns: [...ep.turns, turn] })
        : undefined;
    let observation = request
      ? this.observationTokens({ messages: [...f.messages!, ...request.messages] }, history, ep.tools, p.closed)
      : plain;
    if (request && observation.length >= limit) [request, observation] = [undefined, plain]; // no room to ask: go on without
    if (observation.length >= limit) {
      // No room left for another turn: nobody would sample from this observation. After its own
      // turn the flow may still rewrite the context (`advance` ends the episode if it does not).
      history?.push(assistant);
      if (!p.asked) return { observation: [], end: "max_total_tokens" };
      ep.turns.push(turn);
      return { observation: [], full: true };
    }
    ep.messages = messages && request ? [...messages, ...request.messages] : messages;
    ep.turns.push(turn);
    ep.asked = request;
    return { observation };
  }

  /**
   * After the step is recorded: the next context, extended, or rewritten by the flow (or by an env
   * that rebuilt its prompt). Returns why the episode ended, if it did.
   */
  private async advance(ep: Episode, p: Played, o: Observed): Promise<EndReason | undefined> {
    ep.tail = {
      tokens: [...ep.context, ...p.action.tokens, ...o.observation],
      closed: p.closed,
      endsWithObservation: o.end === undefined && !o.full,
    };
    if (o.end !== undefined) return o.end;
    ep.context = ep.tail.tokens;
    if (ep.asked) return undefined; // the request is answered first
    // The env rebuilt the prompt: the next turn starts a new segment from it (a flow may still rewrite it).
    const rebuilt = obsField(p.result.observation).prompt;
    const rewrite = (await this.prepareContext(this.flowState(ep, p.turn))) ?? (rebuilt && { messages: [...rebuilt] });
    if (!rewrite) return o.full ? "max_total_tokens" : undefined;
    ep.messages = [...rewrite.messages];
    ep.context = rewrite.tokens ? rewrite.tokens.slice() : this.firstContext({ messages: ep.messages }, ep.tools);
    ep.turns = rewrite.tokens && rewrite.turns ? [...rewrite.turns] : [];
    ep.tail = { tokens: ep.context, closed: false, endsWithObservation: true };
    return ep.context.length >= this.options.maxTotalTokens ? "max_total_tokens" : undefined;
  }

  private flowState(ep: Episode, turn: number): FlowState {
    return {
      turn,
      messages: ep.messages,
      context: ep.context,
      tools: ep.tools,
      prompt: ep.prompt,
      opening: ep.opening,
      turns: ep.turns,
    };
  }

  private finishEpisode(ep: Episode, end: EndReason, rec: TrajectoryBuilder): Trajectory {
    if (!this.options.driftCheck || !ep.messages) return rec.finish(end);
    try {
      return rec.finish(end, {
        drift: checkDrift(this.chat, {
          messages: ep.messages,
          tools: ep.tools,
          tokens: ep.tail.tokens,
          endsWithObservation: ep.tail.endsWithObservation,
          actionClosed: ep.tail.closed,
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
