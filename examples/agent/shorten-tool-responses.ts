/**
 * A flow that rewrites its context: before each turn, tool responses older
 * than the newest `keep` are cut to `maxChars`. A rewritten context starts a
 * new segment of the trajectory (a new training datum); within a segment the
 * tokens are still exactly those sampled and observed.
 */
import { AgentFlow, type AgentMessage, type ContextRewrite, type FlowState } from "agent-r1/agent";

export class ShortenToolResponses<Row = unknown> extends AgentFlow<Row> {
  keep = 1;
  maxChars = 40;

  protected prepareContext(s: FlowState): ContextRewrite | undefined {
    if (!s.messages) return undefined; // raw text/token observations: nothing to rewrite
    const toolAt = s.messages.flatMap((m, i) => (m.role === "tool" ? [i] : []));
    const old = new Set(toolAt.slice(0, Math.max(0, toolAt.length - this.keep)));
    const shorten = (m: AgentMessage, i: number): AgentMessage =>
      old.has(i) && m.content.length > this.maxChars
        ? { ...m, content: `${m.content.slice(0, this.maxChars)} [shortened]` }
        : m;
    const messages = s.messages.map(shorten);
    return messages.some((m, i) => m !== s.messages![i]) ? { messages } : undefined;
  }
}
