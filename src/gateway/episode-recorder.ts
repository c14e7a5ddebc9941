/**
 * One episode of an agent that talks to the policy through OpenAI chat completions, recorded token
 * for token as the built-in rollout records it (src/agent/agent-flow.ts):
 *  - the first request's messages are rendered once by the chat template;
 *  - each completion is sampled on the engine, and its token ids and logprobs are kept as sampled;
 *  - a later request must repeat the episode so far (its messages, our answer as we gave it, the
 *    same tools) and add messages after it: only those new messages are tokenized, as the delta
 *    after the action (the same rule as the rollout: never re-tokenize what was sampled);
 *  - a request that rewrites the history (drops, shortens or summarizes messages, changes the tools)
 *    starts a new segment from its own rendering, as an AgentFlow context rewrite does, and the
 *    reason is recorded.
 * When the agent returns, `finish` gives the step-level Trajectory (the reward on its last step),
 * with the drift check of the final segment.
 *
 * Tool results. A client runs its tools itself and sends their results back as `role: "tool"`
 * messages in its next request; they are kept on the calls of the step that made them (matched by
 * tool_call_id, else in order among the new messages), as `text`. A result counts as a tool error
 * (`ok: false`, kind tool_error) when its content begins with "Error:" (any case; what ToolEnv writes
 * for a failed call, and what LangChain and most hand-written loops write) or with the OpenAI Agents
 * SDK's "An error occurred while running the tool"; any other result is ok (there is no error flag on
 * a tool message in the chat-completions API, so the text is all there is to go by). A call no result
 * ever came back for (the agent returned, or rewrote the history without it) is a tool error, "no tool
 * result came back".
 *
 * Limits, as the built-in rollout holds them, each answered so that clients do not retry it:
 *  - `maxTurns` completions per episode: the next request is refused (400, code max_turns_reached)
 *    and the episode ends truncated, endReason max_turns;
 *  - `maxTotalTokens`: a request whose conversation is at or over it is refused (400,
 *    context_length_exceeded, as OpenAI answers) and the episode ends truncated, max_total_tokens
 *    (a first request over it leaves no step: the episode has nothing to keep);
 *  - once truncated, every later request gets the same refusal; the episode is kept with the reward
 *    the agent returns (0 when it throws).
 * A second request while one runs is a 409 (a retry once the first is answered can succeed); a request
 * after the episode ended is a 410.
 *
 * Episodes never mix. A first request, or one that does not extend the episode, whose conversation
 * is another row's (`otherRow`: it quotes that row and nothing of this one's, row-quotes.ts) is never
 * recorded: it is refused (400, episode_mixed, not retried) and the episode is marked mixed, so it
 * fails whole instead of holding two rows' conversations under one reward. That is what a client
 * shared across episodes does (a module-level client, or one a framework caches from the first
 * episode): the message says so and how to fix it. Any other rewrite is a new segment. A request equal to the one just answered (a client's retry of an answer it did
 * not receive) gets the same answer again, sampled and counted once.
 */
import type { Engine, SampledSequence, StopReason } from "../engine/types.js";
import type { ToolSchema } from "../model/chat-template.js";
import { renderMessages, withTemplateVars, type AgentMessage, type ChatSetup } from "../agent/chat-setup.js";
import { checkDrift } from "../agent/drift.js";
import { ChatTemplateError } from "../agent/errors.js";
import { observationDeltaTokens } from "../agent/observation-delta.js";
import { TrajectoryBuilder, type Trajectory } from "../agent/trajectory.js";
import type { ToolCallRecord } from "../agent/tool-runner.js";
import { wellFormed } from "../agent/tool.js";
import { Rng } from "../util/rng.js";
import { extractToolCalls, type OpenAiToolCall } from "../serve/tool-calls.js";
import { sameMessage, sameRequest, toolsKey } from "./message-compare.js";

export interface RecorderOptions {
  chat: ChatSetup;
  engine: Engine;
  /** Tokens per completion when the request sets no max_tokens. */
  maxTokensPerTurn: number;
  /** The episode's whole token budget (context + completion). */
  maxTotalTokens: number;
  /** The recipe's sampling temperature: used whatever the request says, unless `agentSampling` is "agent". */
  temperature: number;
  /** The recipe's top-p (default 1), likewise. */
  topP?: number;
  /**
   * Whose sampling settings a completion uses. "recipe" (default): the recipe's temperature and
   * top-p, and at most its maxTokensPerTurn (a request's smaller max_tokens is kept); what the
   * request asked for instead is noted (`samplingAsked`). "agent": the request's values, the recipe's
   * where it sets none.
   */
  agentSampling?: "recipe" | "agent";
  /** Completions per episode at most; the next request ends the episode as truncated. Default: no limit. */
  maxTurns?: number;
  /** Fixes the draws: completion k samples with a seed derived from (seed, k). */
  seed?: number;
  /** The other row a conversation is about, when it quotes another row and nothing of this episode's. */
  otherRow?: (messages: AgentMessage[]) => number | undefined;
}

export interface CompletionRequest {
  messages: AgentMessage[];
  tools?: ToolSchema[];
  maxTokens?: number;
  temperature?: number;
  topP?: number;
  /** The client's User-Agent, named when its sampling settings are overridden. */
  userAgent?: string;
  /**
   * Text forced after the generation prompt (a forced tool call's opening, serve/tool-choice.ts): its
   * tokens end the context as observation (weight 0), and the answer is it followed by the sample.
   */
  forced?: string;
  /**
   * Stop strings of the request, honoured beside the end of turn: the sampled tokens keep the stop
   * (the action is what was sampled), and the answer ends before it, as OpenAI's API returns it.
   */
  stop?: string[];
  /** The request's chat_template_kwargs: the episode's template variables, the same in every request. */
  templateVars?: Record<string, unknown>;
  signal?: AbortSignal;
}

export interface Completion {
  /** The answer as the client sees it. */
  content: string | null;
  toolCalls?: OpenAiToolCall[];
  finishReason: "stop" | "length" | "tool_calls";
  tokens: number[];
  logprobs: number[];
  promptTokens: number;
}

/** A request the episode refuses, with the HTTP status and OpenAI error code the gateway answers it with. */
export class RecorderError extends Error {
  constructor(
    message: string,
    readonly status: 400 | 409 | 410 = 400,
    readonly code: string = "episode_conflict",
  ) {
    super(message);
    this.name = "RecorderError";
  }
}

/** Does a tool message's content report a failure? (The rule in the header.) */
export function isToolErrorText(content: string): boolean {
  return /^\s*error\s*:/i.test(content) || /^\s*An error occurred while running the tool/.test(content);
}

interface Pending {
  turn: number;
  context: number[];
  action: number[];
  logprobs: number[];
  stopReason: StopReason;
  /** The assistant message the client must send back (in template form). */
  assistant: AgentMessage;
  /** The ids the client got for the answer's tool calls (its tool results name them). */
  callIds: string[];
  sampleMs: number;
  /** The policy version that sampled it, when the engine reported one. */
  policyVersion?: number;
}

/** `text` up to the first of the stop strings it holds (all of it when it holds none). */
function beforeStop(text: string, stops: string[]): string {
  let end = text.length;
  for (const s of stops) {
    const at = s.length > 0 ? text.indexOf(s) : -1;
    if (at >= 0 && at < end) end = at;
  }
  return text.slice(0, end);
}

/** How a request relates to the episode so far. */
type Next =
  | { kind: "first" }
  | { kind: "extends"; expected: AgentMessage[]; fresh: AgentMessage[]; observation: number[] }
  | { kind: "rewrite"; reason: string };

export class EpisodeRecorder {
  private readonly rec: TrajectoryBuilder;
  /** The chat setup with the episode's template variables (its first request's chat_template_kwargs). */
  private chat: ChatSetup;
  private templateVarsKey?: string;
  /** The conversation before the pending action, in template form. */
  private history: AgentMessage[] = [];
  private tools?: ToolSchema[];
  /** toolsKey(tools), kept with them: each request compares its tools with the episode's. */
  private toolsText = toolsKey(undefined);
  private pending?: Pending;
  private completions = 0;
  private callCount = 0;
  private busy = false;
  private ended = false;
  /** Set when a limit ended the episode: the reason, the refusal, and the tool results the refused request carried. */
  private truncation?: {
    endReason: "max_turns" | "max_total_tokens";
    error: RecorderError;
    results: AgentMessage[];
    inOrder: boolean;
  };
  /** A first request over the token budget: why the episode has no step. */
  private firstRefusal?: string;
  /** Set when another conversation reached this episode: why it fails. */
  private mixedWhy?: string;
  /** The request just answered (messages and tools, as JSON) and its answer, for a client's retry. */
  private last?: { req: CompletionRequest; out: Completion };
  /** Requests that repeated the one just answered, answered again without sampling. */
  replays = 0;
  /** Aborts a completion still sampling when the episode is closed. */
  private readonly closing = new AbortController();
  /** Why requests started new segments. */
  readonly segmentReasons: string[] = [];
  /** What the agent's requests asked for that the recipe's sampling overrode ("temperature 0 (openai/6.1)"). */
  readonly samplingAsked = new Set<string>();

  constructor(
    readonly id: string,
    readonly rowIndex: number,
    readonly sampleIndex: number,
    private readonly o: RecorderOptions,
  ) {
    this.rec = new TrajectoryBuilder(id, rowIndex, sampleIndex);
    this.chat = o.chat;
  }

  get calls(): number {
    return this.completions;
  }

  /** Why the episode recorded nothing although the agent asked (its first request was over the budget). */
  get refusal(): string | undefined {
    return this.completions === 0 ? this.firstRefusal : undefined;
  }

  /** Completions sampled for the episode. */
  get sampled(): number {
    return this.completions;
  }

  /** Why the episode fails whole: requests of another conversation reached it (a client shared across episodes). */
  get mixed(): string | undefined {
    return this.mixedWhy;
  }

  /** Whether a limit ended the episode (it is kept whatever the agent does next). */
  get truncated(): boolean {
    return this.truncation !== undefined;
  }

  /** Stops a completion still sampling: the episode is over (the gateway forgets it). */
  close(): void {
    this.ended = true;
    this.closing.abort(new Error(`episode ${this.id} was closed`));
  }

  /**
   * The first request's chat_template_kwargs become the episode's template variables; a later
   * request must send the same, since the episode's tokens were rendered with them.
   */
  private useTemplateVars(vars: Record<string, unknown> | undefined): void {
    const key = JSON.stringify(vars ?? {});
    if (this.templateVarsKey === undefined) {
      this.templateVarsKey = key;
      this.chat = withTemplateVars(this.o.chat, vars);
    } else if (key !== this.templateVarsKey)
      throw new RecorderError(
        `episode ${this.id}: chat_template_kwargs ${key} differ from the episode's ${this.templateVarsKey}; the episode's tokens were rendered with those, so send the same in every request`,
      );
  }

  /** How `req` relates to the episode: its first request, an extension (with the observation delta), or a rewrite. */
  private classify(req: CompletionRequest): Next {
    const p = this.pending;
    if (!p) return { kind: "first" };
    const expected = [...this.history, p.assistant];
    const reason = this.divergence(req, expected);
    if (reason !== undefined) return { kind: "rewrite", reason };
    const fresh = req.messages.slice(expected.length);
    const observation = observationDeltaTokens(this.chat, {
      history: this.history,
      messages: fresh,
      tools: this.tools,
      actionClosed: p.action[p.action.length - 1] === this.chat.endOfTurnId,
    });
    return { kind: "extends", expected, fresh, observation };
  }

  /** The context `req` samples from, given how it relates to the episode. */
  private contextOf(req: CompletionRequest, next: Next): number[] {
    if (next.kind === "extends") return [...this.pending!.context, ...this.pending!.action, ...next.observation];
    const chat = this.chat;
    return chat.tokenizer.encode(renderMessages(chat, req.messages, { tools: req.tools, addGenerationPrompt: true }));
  }

  /** Records the pending action (if any) and makes `req` the episode so far. */
  private commit(req: CompletionRequest, next: Next, forced: number[]): void {
    const p = this.pending;
    if (next.kind === "extends") {
      this.record(p!, [...next.observation, ...forced], 0, false, next.fresh, true);
      this.history = [...next.expected, ...next.fresh];
      return;
    }
    if (p) {
      this.record(p, [], 0, false, req.messages, false);
      if (next.kind === "rewrite") this.segmentReasons.push(next.reason);
    }
    this.history = req.messages.slice();
    this.tools = req.tools;
    this.toolsText = toolsKey(req.tools);
  }

  /** Ends the episode at a limit: the pending action will be its last step, with the refused request's tool results. */
  private truncate(
    endReason: "max_turns" | "max_total_tokens",
    error: RecorderError,
    req: CompletionRequest,
    next: Next,
  ): RecorderError {
    this.truncation =
      next.kind === "extends"
        ? { endReason, error, results: next.fresh, inOrder: true }
        : { endReason, error, results: req.messages, inOrder: false };
    return error;
  }

  /** Why `req` does not extend the episode, or undefined when it does. */
  private divergence(req: CompletionRequest, expected: AgentMessage[]): string | undefined {
    if (toolsKey(req.tools) !== this.toolsText) return "the tools changed";
    if (req.messages.length <= expected.length)
      return `the request has ${req.messages.length} messages, not more than the episode's ${expected.length}`;
    const at = expected.findIndex((m, i) => !sameMessage(m, req.messages[i]));
    if (at >= 0)
      return at === expected.length - 1
        ? "the assistant's answer came back changed"
        : `message ${at} (${expected[at].role}) differs from the episode's`;
    if (req.messages[expected.length].role === "assistant") return "an assistant message follows the answer";
    return undefined;
  }

  /**
   * The pending action as a step. `messages` are where its tool results may be (the request after it):
   * matched by tool_call_id, and, when `inOrder` (the messages are new ones after the action), the
   * rest taken in order from the tool messages there.
   */
  private record(
    p: Pending,
    observation: number[],
    reward: number,
    done: boolean,
    messages: AgentMessage[] = [],
    inOrder = false,
  ): void {
    const results = toolResults(p, messages, inOrder);
    const toolCalls: ToolCallRecord[] = (p.assistant.tool_calls ?? []).map((c, i) => {
      const content = results[i];
      const base = {
        index: this.callCount++,
        turn: p.turn,
        name: c.function.name,
        arguments: c.function.arguments as Record<string, unknown>,
        raw: "",
        startedAt: 0,
        durationMs: 0,
      };
      if (content === undefined)
        return {
          ...base,
          ok: false,
          text: "",
          error: { kind: "tool_error" as const, message: "no tool result came back" },
        };
      const text = wellFormed(content);
      return isToolErrorText(text)
        ? { ...base, ok: false, text, error: { kind: "tool_error" as const, message: text } }
        : { ...base, ok: true, text };
    });
    this.rec.add(p.context, {
      action: p.action,
      logprobs: p.logprobs,
      stopReason: p.stopReason,
      observation,
      reward,
      done,
      toolCalls,
      info: {},
      timing: { sampleMs: p.sampleMs, envMs: 0 },
      ...(p.policyVersion !== undefined ? { policyVersion: p.policyVersion } : {}),
    });
    this.pending = undefined;
  }

  private endedError(): RecorderError {
    return new RecorderError(`episode ${this.id} has ended: its agent already returned`, 410, "episode_ended");
  }

  /** The temperature, top-p and token limit of a completion, by `agentSampling`; notes what the recipe overrode. */
  private sampling(req: CompletionRequest, room: number): { maxTokens: number; temperature: number; topP: number } {
    const o = this.o;
    const topP = o.topP ?? 1;
    if (o.agentSampling === "agent")
      return {
        maxTokens: Math.min(req.maxTokens ?? o.maxTokensPerTurn, room),
        temperature: req.temperature ?? o.temperature,
        topP: req.topP ?? topP,
      };
    const by = req.userAgent ? ` (${req.userAgent.slice(0, 60)})` : "";
    if (req.temperature !== undefined && req.temperature !== o.temperature)
      this.samplingAsked.add(
        `temperature ${req.temperature}${by}: the recipe's rollout.temperature ${o.temperature} was used`,
      );
    if (req.topP !== undefined && req.topP !== topP)
      this.samplingAsked.add(`top_p ${req.topP}${by}: the recipe's rollout.topP ${topP} was used`);
    if (req.maxTokens !== undefined && req.maxTokens > o.maxTokensPerTurn)
      this.samplingAsked.add(
        `max_tokens ${req.maxTokens}${by}: the recipe's rollout.maxTokensPerTurn ${o.maxTokensPerTurn} was used`,
      );
    return {
      maxTokens: Math.min(req.maxTokens ?? o.maxTokensPerTurn, o.maxTokensPerTurn, room),
      temperature: o.temperature,
      topP,
    };
  }

  /** One chat completion of the episode. */
  async complete(req: CompletionRequest): Promise<Completion> {
    if (this.ended) throw this.endedError();
    if (this.truncation) throw this.truncation.error;
    if (this.busy)
      throw new RecorderError(
        `episode ${this.id} has a completion running: an episode is one conversation, so its requests go one at a time (requests of several agents here mean a client shared across episodes: make the client inside agent() from ctx.baseURL and ctx.apiKey)`,
        409,
        "episode_busy",
      );
    if (this.last && this.pending && sameRequest(this.last.req, req)) {
      this.replays++;
      return this.last.out;
    }
    this.useTemplateVars(req.templateVars);
    this.busy = true;
    try {
      const next = this.classify(req);
      this.refuseMixedOrOverTurns(req, next);
      const forced = req.forced ? this.chat.tokenizer.encode(req.forced) : [];
      const context = [...this.contextOf(req, next), ...forced];
      const room = this.roomFor(context, req, next);
      const t0 = performance.now();
      const seq = await this.draw(context, req, room);
      // Only a completion that was sampled changes the episode: a failed one can be asked again.
      this.commit(req, next, forced);
      const { text, calls, assistant } = this.answerOf(seq, forced, req);
      this.pending = {
        turn: this.completions,
        context,
        action: seq.tokens,
        logprobs: seq.logprobs,
        stopReason: seq.stopReason,
        assistant,
        callIds: calls ? calls.toolCalls.map((c) => c.id) : [],
        sampleMs: performance.now() - t0,
        ...(seq.policyVersion !== undefined ? { policyVersion: seq.policyVersion } : {}),
      };
      this.completions++;
      const out: Completion = {
        content: calls ? calls.content : text,
        ...(calls ? { toolCalls: calls.toolCalls } : {}),
        finishReason: calls ? "tool_calls" : seq.stopReason,
        tokens: seq.tokens,
        logprobs: seq.logprobs,
        promptTokens: context.length,
      };
      this.last = { req, out };
      return out;
    } finally {
      this.busy = false;
    }
  }

  /** Refuses another row's conversation (a shared client), and a request past maxTurns (which truncates). */
  private refuseMixedOrOverTurns(req: CompletionRequest, next: Next): void {
    const other = next.kind === "extends" ? undefined : this.o.otherRow?.(req.messages);
    if (other !== undefined) {
      this.mixedWhy ??= `episode ${this.id} (row ${this.rowIndex}) received a conversation of row ${other}: the agent's OpenAI client is shared across episodes (made once at module level, or cached by its framework, as the OpenAI Agents SDK's setDefaultOpenAIClient does); make the client inside agent() from ctx.baseURL and ctx.apiKey`;
      throw new RecorderError(this.mixedWhy, 400, "episode_mixed");
    }
    const max = this.o.maxTurns;
    if (max !== undefined && this.completions >= max && this.pending)
      throw this.truncate(
        "max_turns",
        new RecorderError(
          `episode ${this.id}: the episode has had its ${max} turns (maxTurns ${max}); it has ended as truncated`,
          400,
          "max_turns_reached",
        ),
        req,
        next,
      );
  }

  /** The tokens left in the episode's budget after `context`; none refuses the request (and truncates a started episode). */
  private roomFor(context: number[], req: CompletionRequest, next: Next): number {
    const room = this.o.maxTotalTokens - context.length;
    if (room >= 1) return room;
    const error = new RecorderError(
      `episode ${this.id}: the conversation is ${context.length} tokens, at or over the episode's budget of ${this.o.maxTotalTokens} (maxTotalTokens)${this.pending ? "; it has ended as truncated" : ""}`,
      400,
      "context_length_exceeded",
    );
    if (this.pending) throw this.truncate("max_total_tokens", error, req, next);
    this.firstRefusal = `the first request is ${context.length} tokens, at or over maxTotalTokens ${this.o.maxTotalTokens}`;
    throw error;
  }

  /** One sequence from the engine, stopped when the client closes the request or the episode ends. */
  private async draw(context: number[], req: CompletionRequest, room: number): Promise<SampledSequence> {
    const chat = this.chat;
    const signal = req.signal ? AbortSignal.any([req.signal, this.closing.signal]) : this.closing.signal;
    let res: Awaited<ReturnType<Engine["sample"]>>;
    try {
      res = await this.o.engine.sample(context, {
        n: 1,
        ...this.sampling(req, room),
        stop: [chat.endOfTurnId, ...(req.stop ?? []).filter((s) => s.length > 0)],
        ...(this.o.seed !== undefined ? { seed: new Rng(this.o.seed, this.completions).int(0x7fffffff) } : {}),
        signal,
      });
    } catch (e) {
      if (this.ended) throw this.endedError();
      if (signal.aborted) throw new RecorderError("the client closed the request", 400, "request_cancelled");
      throw e;
    }
    if (this.ended) throw this.endedError();
    return res.sequences[0];
  }

  /** The sampled text (forced prefix included, cut at a stop string), its tool calls, and the assistant message it makes. */
  private answerOf(seq: SampledSequence, forced: number[], req: CompletionRequest) {
    const chat = this.chat;
    const closed = seq.tokens[seq.tokens.length - 1] === chat.endOfTurnId;
    const text = beforeStop(
      chat.tokenizer.decode([...forced, ...(closed ? seq.tokens.slice(0, -1) : seq.tokens)]),
      closed || seq.stopReason !== "stop" ? [] : (req.stop ?? []),
    );
    const calls = req.tools && req.tools.length > 0 ? extractToolCalls(text) : undefined;
    const assistant: AgentMessage = calls
      ? {
          role: "assistant",
          content: calls.content ?? "",
          tool_calls: calls.toolCalls.map((c) => ({
            type: "function",
            function: {
              name: c.function.name,
              arguments: JSON.parse(c.function.arguments) as Record<string, unknown>,
            },
          })),
        }
      : { role: "assistant", content: text };
    return { text, calls, assistant };
  }

  /** Ends the episode with the agent's reward: the trajectory, or undefined when the agent never called the model. */
  finish(reward: number): Trajectory | undefined {
    this.ended = true;
    const p = this.pending;
    if (!p) return undefined;
    const messages = [...this.history, p.assistant];
    const cut = this.truncation;
    this.record(p, [], reward, !cut, cut?.results, cut?.inOrder);
    const end = cut?.endReason ?? "done";
    const last = this.rec; // the drift check of the final segment
    const tokens = finalSegment(last.finish(end));
    try {
      return last.finish(end, {
        drift: checkDrift(this.chat, {
          messages,
          tools: this.tools,
          tokens,
          endsWithObservation: false,
          actionClosed: p.action[p.action.length - 1] === this.chat.endOfTurnId,
        }),
      });
    } catch (err) {
      if (err instanceof ChatTemplateError) return last.finish(end, { driftError: err.message });
      throw err;
    }
  }
}

/**
 * The content of the tool result answering each of `p`'s calls (undefined where none came back): the
 * tool message naming the call's id, else (`inOrder`) the next unclaimed tool message.
 */
function toolResults(p: Pending, messages: AgentMessage[], inOrder: boolean): (string | undefined)[] {
  const calls = p.assistant.tool_calls ?? [];
  if (calls.length === 0) return [];
  const tools = messages.filter((m) => m.role === "tool");
  const claimed = new Set<AgentMessage>();
  const out: (string | undefined)[] = calls.map((_, i) => {
    const m = tools.find((t) => t.tool_call_id !== undefined && t.tool_call_id === p.callIds[i]);
    if (m) claimed.add(m);
    return m?.content ?? undefined;
  });
  if (!inOrder) return out;
  // Tool messages without a matching id answer the remaining calls in order.
  const rest = tools.filter((t) => !claimed.has(t) && !p.callIds.includes(t.tool_call_id ?? ""));
  return out.map((c) => c ?? rest.shift()?.content ?? undefined);
}

/** The tokens of a trajectory's last segment: its stored context and every action and observation after it. */
function finalSegment(t: Trajectory): number[] {
  let start = t.steps.length - 1;
  while (start > 0 && t.steps[start].extendsPrevious) start--;
  const out = t.steps[start].context!.slice();
  for (let k = start; k < t.steps.length; k++) out.push(...t.steps[k].action, ...t.steps[k].observation);
  return out;
}
