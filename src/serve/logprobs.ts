/**
 * Logprob reports in the two OpenAI shapes. Values are those the engine
 * reports: each sampled token's logprob under the distribution it was drawn
 * from (temperature, top-k, top-p applied; greedy reports the untempered
 * one), and the alternatives under that same distribution.
 */
import type { SampledSequence } from "../engine/types.js";
import type { TokenStrings } from "./output-text.js";

export interface ChatTokenLogprob {
  token: string;
  logprob: number;
  bytes: number[];
  top_logprobs: { token: string; logprob: number; bytes: number[] }[];
}

/** Chat: one entry per token in [from, to) of the sequence. */
export function chatLogprobEntries(
  strings: TokenStrings,
  seq: SampledSequence,
  from: number,
  to: number,
): ChatTokenLogprob[] {
  const out: ChatTokenLogprob[] = [];
  for (let i = from; i < to; i++) {
    const id = seq.tokens[i];
    out.push({
      token: strings.text(id),
      logprob: seq.logprobs[i],
      bytes: strings.bytes(id),
      top_logprobs: (seq.topLogprobs?.[i] ?? []).map((a) => ({
        token: strings.text(a.token),
        logprob: a.logprob,
        bytes: strings.bytes(a.token),
      })),
    });
  }
  return out;
}

export interface CompletionLogprobs {
  tokens: string[];
  token_logprobs: (number | null)[];
  /** Per token, alternative token text -> logprob (null when none were asked for). */
  top_logprobs: (Record<string, number> | null)[] | null;
  text_offset: number[];
}

/** Legacy completions: tokens with their logprobs and character offsets into the returned text. */
export function completionLogprobs(
  strings: TokenStrings,
  tokens: number[],
  logprobs: (number | null)[],
  top: ({ token: number; logprob: number }[] | null)[] | null,
  pieces: string[],
  startOffset: number,
): CompletionLogprobs {
  const text_offset: number[] = [];
  let offset = startOffset;
  for (const p of pieces) {
    text_offset.push(offset);
    offset += p.length;
  }
  return {
    tokens: tokens.map((t) => strings.text(t)),
    token_logprobs: logprobs,
    top_logprobs: top && top.map((alts) => (alts ? byText(strings, alts) : null)),
    text_offset,
  };
}

/** Two ids can decode to the same text (partial characters): the more likely one keeps the key. */
function byText(strings: TokenStrings, alts: { token: number; logprob: number }[]): Record<string, number> {
  const m = new Map<string, number>();
  for (const a of alts) if (!m.has(strings.text(a.token))) m.set(strings.text(a.token), a.logprob);
  return Object.fromEntries(m);
}
