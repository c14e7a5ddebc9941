/**
 * Trained compaction: an agent flow that, once the context grows past `atTokens`, asks the policy
 * to summarize its progress (a user turn with `prompt`), then continues the episode from the
 * system prompt + the task + that summary + the last `keepLast` turns. The summary is an action
 * like any other, sampled by the policy and trained with the episode's advantage, so the model
 * learns what to keep. The pieces (before the compaction, with the summary at its end; after it)
 * are separate segments of one trajectory, hence separate datums of one sequence: one episode for
 * the reward, the group statistics and the aggregation (src/rl/datums.ts).
 *
 * In the family of verl's agent-loop context managers (the loop owns the context and may rebuild
 * it), ART's additional histories (one episode trained as several token histories) and prime-rl's
 * automatic compaction (summarize when the window fills, keep going); here the new context is
 * assembled from tokens already held (src/agent/compacted-context.ts), never re-tokenized.
 *
 * It needs observations as chat messages (ToolEnv's): an env that rebuilds its prompt each step
 * never grows its context, and text or token observations cannot carry the request; with those
 * it behaves as the plain AgentLoop.
 */
import type { Engine } from "../engine/types.js";
import { AgentLoop } from "./agent-loop.js";
import type { ChatSetup } from "./chat-setup.js";
import { resolveCompaction, type CompactionOptions, type ResolvedCompaction } from "./compaction-options.js";
import { compactedContext } from "./compacted-context.js";
import type { ContextRewrite, FlowRequest, FlowState } from "./flow-state.js";
import type { AgentLoopOptions } from "./loop-options.js";

/** The summary turn's name: its step's `info.flowTurn`. */
export const COMPACTION_TURN = "compaction";

export interface CompactionFlowOptions extends AgentLoopOptions {
  compaction: CompactionOptions;
}

export class CompactionFlow<Row = unknown> extends AgentLoop<Row> {
  readonly compaction: ResolvedCompaction;

  constructor(engine: Engine, chat: ChatSetup, options: CompactionFlowOptions) {
    const { compaction, ...loop } = options;
    super(engine, chat, loop);
    this.compaction = resolveCompaction(compaction, this.options.maxTotalTokens);
  }

  /** Asks for the summary once the context the next turn would sample from is longer than atTokens. */
  protected override request(s: FlowState): FlowRequest | undefined {
    if (s.context.length <= this.compaction.atTokens) return undefined;
    return { name: COMPACTION_TURN, messages: [{ role: "user", content: this.compaction.prompt }] };
  }

  /** After the summary turn: the compacted context; otherwise the context keeps growing. */
  protected override prepareContext(s: FlowState): ContextRewrite | undefined {
    if (s.turns[s.turns.length - 1]?.asked !== COMPACTION_TURN) return undefined;
    return compactedContext(this.chat, s, this.compaction.keepLast);
  }
}
