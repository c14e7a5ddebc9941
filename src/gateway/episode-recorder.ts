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
 */
import type { Engine, StopReason } from "../engine/types.js";
import type { ToolSchema } from "../model/chat-template.js";
import { renderMessages, type AgentMessage, type ChatSetup } from "../agent/chat-setup.js";
import { checkDrift } from "../agent/drift.js";
import { ChatTemplateError } from "../agent/errors.js";
import { observationDeltaTokens } from "../agent/observation-delta.js";
import { TrajectoryBuilder, type Trajectory } from "../agent/trajectory.js";
import type { ToolCallRecord } from "../agent/tool-runner.js";
import { Rng } from "../util/rng.js";
import { extractToolCalls, type OpenAiToolCall } from "../serve/tool-calls.js";

export interface RecorderOptions {
  chat: ChatSetup;
  engine: Engine;
  /** Tokens per completion when the request sets no max_tokens. */
  maxTokensPerTurn: number;
  /** The episode's whole token budget (context + completion). */
  maxTotalTokens: number;
  /** Sampling temperature when the request sets none. */
  temperature: number;
  /** Fixes the draws: completion k samples with a seed derived from (seed, k). */
  seed?: number;
}

export interface CompletionRequest {
  messages: AgentMessage[];
  tools?: ToolSchema[];
  maxTokens?: number;
  temperature?: number;
  topP?: number;
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

/** Why a request could not continue the episode: it starts a new segment. */
export class RecorderError extends Error {}

interface Pending {
  turn: number;
  context: number[];
  action: number[];
  logprobs: number[];
  stopReason: StopReason;
  /** The assistant message the client must send back (in template form). */
  assistant: AgentMessage;
  sampleMs: number;
}

/** A message compared as the template sees it: role, content, tool calls by name and parsed arguments. */
function sameMessage(a: AgentMessage, b: AgentMessage): boolean {
  if (a.role !== b.role || (a.content ?? "").trim() !== (b.content ?? "").trim()) return false;
  const ca = a.tool_calls ?? [],
    cb = b.tool_calls ?? [];
  if (ca.length !== cb.length) return false;
  return ca.every(
    (c, i) =>
      c.function.name === cb[i].function.name &&
      canonical(c.function.arguments) === canonical(cb[i].function.arguments),
  );
}

function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(",")}]`;
  if (v && typeof v === "object")
    return `{${Object.keys(v)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonical((v as Record<string, unknown>)[k])}`)
      .join(",")}}`;
  return JSON.stringify(v);
}

const toolsKey = (tools?: ToolSchema[]) => canonical(tools ?? []);

export class EpisodeRecorder {
  private readonly rec: TrajectoryBuilder;
  /** The conversation before the pending action, in template form. */
  private history: AgentMessage[] = [];
  private tools?: ToolSchema[];
  private pending?: Pending;
  private completions = 0;
  private callCount = 0;
  private busy = false;
  private ended = false;
  /** Why requests started new segments. */
  readonly segmentReasons: string[] = [];

  constructor(
    readonly id: string,
    readonly rowIndex: number,
    readonly sampleIndex: number,
    private readonly o: RecorderOptions,
  ) {
    this.rec = new TrajectoryBuilder(id, rowIndex, sampleIndex);
  }

  get calls(): number {
    return this.completions;
  }

  /** The context this request samples from: the episode extended by the new messages, or a new segment. */
  private contextFor(req: CompletionRequest): number[] {
    const chat = this.o.chat;
    const render = () =>
      chat.tokenizer.encode(renderMessages(chat, req.messages, { tools: req.tools, addGenerationPrompt: true }));
    const p = this.pending;
    if (!p) {
      this.history = req.messages.slice();
      this.tools = req.tools;
      return render();
    }
    const expected = [...this.history, p.assistant];
    const reason = this.divergence(req, expected);
    const closed = p.action[p.action.length - 1] === chat.endOfTurnId;
    if (reason === undefined) {
      const fresh = req.messages.slice(expected.length);
      const observation = observationDeltaTokens(chat, {
        history: this.history,
        messages: fresh,
        tools: this.tools,
        actionClosed: closed,
      });
      this.record(p, observation, 0, false);
      this.history = [...expected, ...fresh];
      return [...p.context, ...p.action, ...observation];
    }
    this.record(p, [], 0, false);
    this.segmentReasons.push(reason);
    this.history = req.messages.slice();
    this.tools = req.tools;
    return render();
  }

  /** Why `req` does not extend the episode, or undefined when it does. */
  private divergence(req: CompletionRequest, expected: AgentMessage[]): string | undefined {
    if (toolsKey(req.tools) !== toolsKey(this.tools)) return "the tools changed";
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

  /** The pending action as a step; `results` are the tool messages that answered its calls (the client ran them). */
  private record(p: Pending, observation: number[], reward: number, done: boolean, results: AgentMessage[] = []): void {
    const toolCalls: ToolCallRecord[] = (p.assistant.tool_calls ?? []).map((c, i) => ({
      index: this.callCount++,
      turn: p.turn,
      name: c.function.name,
      arguments: c.function.arguments as Record<string, unknown>,
      raw: "",
      ok: i < results.length,
      text: results[i]?.content ?? "",
      ...(i < results.length ? {} : { error: { kind: "tool_error" as const, message: "no tool result came back" } }),
      startedAt: 0,
      durationMs: 0,
    }));
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
    });
    this.pending = undefined;
  }

  /** One chat completion of the episode. */
  async complete(req: CompletionRequest): Promise<Completion> {
    if (this.ended) throw new RecorderError(`episode ${this.id} has ended: its agent already returned`);
    if (this.busy)
      throw new RecorderError(
        `episode ${this.id} has a completion running: an episode is one conversation, so its requests go one at a time`,
      );
    this.busy = true;
    try {
      const chat = this.o.chat;
      const context = this.contextFor(req);
      const room = this.o.maxTotalTokens - context.length;
      if (room < 1)
        throw new RecorderError(
          `episode ${this.id}: the conversation is ${context.length} tokens, at or over the episode's budget of ${this.o.maxTotalTokens}`,
        );
      const t0 = performance.now();
      const res = await this.o.engine.sample(context, {
        n: 1,
        maxTokens: Math.min(req.maxTokens ?? this.o.maxTokensPerTurn, room),
        temperature: req.temperature ?? this.o.temperature,
        topP: req.topP ?? 1,
        stop: [chat.endOfTurnId],
        ...(this.o.seed !== undefined ? { seed: new Rng(this.o.seed, this.completions).int(0x7fffffff) } : {}),
        ...(req.signal ? { signal: req.signal } : {}),
      });
      const seq = res.sequences[0];
      const closed = seq.tokens[seq.tokens.length - 1] === chat.endOfTurnId;
      const text = chat.tokenizer.decode(closed ? seq.tokens.slice(0, -1) : seq.tokens);
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
      this.pending = {
        turn: this.completions,
        context,
        action: seq.tokens,
        logprobs: seq.logprobs,
        stopReason: seq.stopReason,
        assistant,
        sampleMs: performance.now() - t0,
      };
      this.completions++;
      return {
        content: calls ? calls.content : text,
        ...(calls ? { toolCalls: calls.toolCalls } : {}),
        finishReason: calls ? "tool_calls" : seq.stopReason,
        tokens: seq.tokens,
        logprobs: seq.logprobs,
        promptTokens: context.length,
      };
    } finally {
      this.busy = false;
    }
  }

  /** Ends the episode with the agent's reward: the trajectory, or undefined when the agent never called the model. */
  finish(reward: number): Trajectory | undefined {
    this.ended = true;
    const p = this.pending;
    if (!p) return undefined;
    const messages = [...this.history, p.assistant];
    this.record(p, [], reward, true);
    const last = this.rec; // the drift check of the final segment
    const tokens = finalSegment(last.finish("done"));
    try {
      return last.finish("done", {
        drift: checkDrift(this.o.chat, {
          messages,
          tools: this.tools,
          tokens,
          endsWithObservation: false,
          actionClosed: p.action[p.action.length - 1] === this.o.chat.endOfTurnId,
        }),
      });
    } catch (err) {
      if (err instanceof ChatTemplateError) return last.finish("done", { driftError: err.message });
      throw err;
    }
  }
}

/** The tokens of a trajectory's last segment: its stored context and every action and observation after it. */
function finalSegment(t: Trajectory): number[] {
  let start = t.steps.length - 1;
  while (start > 0 && t.steps[start].extendsPrevious) start--;
  const out = t.steps[start].context!.slice();
  for (let k = start; k < t.steps.length; k++) out.push(...t.steps[k].action, ...t.steps[k].observation);
  return out;
}
