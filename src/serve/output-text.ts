/**
 * From a sampled sequence (token ids, exactly as drawn) to the text a client
 * sees: the stop token is left out, and the text ends before the first stop
 * string. The ids themselves are never changed; `kept` says how many of them
 * the text covers, and `pieces[i]` is the text token i adds, so per-token
 * stream deltas concatenate to exactly the non-streamed text.
 */
import { IncrementalDecoder, type Tokenizer } from "../model/tokenizer.js";
import type { SampledSequence, StopReason } from "../engine/types.js";
import type { Stops } from "./sampling-options.js";

export interface DecodedSequence {
  seq: SampledSequence;
  /** Leading tokens of seq.tokens that make up the text. */
  kept: number;
  /** One entry per sampled token; "" for tokens outside the text. */
  pieces: string[];
  text: string;
  finishReason: StopReason;
}

export function decodeSequence(tokenizer: Tokenizer, seq: SampledSequence, stops: Stops): DecodedSequence {
  const n = seq.tokens.length;
  const endedByToken = seq.stopReason === "stop" && n > 0 && stops.ids.has(seq.tokens[n - 1]);
  let kept = endedByToken ? n - 1 : n;
  const decoder = new IncrementalDecoder(tokenizer, { skipSpecialTokens: true });
  const pieces = seq.tokens.map((t, i) => (i < kept ? decoder.push(t) : ""));
  if (kept > 0) pieces[kept - 1] += decoder.flush();
  if (seq.stopReason === "stop" && !endedByToken && stops.strings.length > 0) {
    const full = pieces.join("");
    const hits = stops.strings.map((s) => full.indexOf(s)).filter((i) => i >= 0);
    if (hits.length > 0) {
      const cut = Math.min(...hits);
      let offset = 0;
      const decoded = kept;
      for (let i = 0; i < decoded; i++) {
        const piece = pieces[i];
        if (offset >= cut) {
          pieces[i] = "";
          kept = Math.min(kept, i);
        } else if (offset + piece.length > cut) {
          pieces[i] = piece.slice(0, cut - offset);
        }
        offset += piece.length;
      }
    }
  }
  return { seq, kept, pieces, text: pieces.join(""), finishReason: seq.stopReason };
}

/** Token strings and bytes for logprob reports, cached per id. */
export class TokenStrings {
  private cache = new Map<number, string>();
  constructor(readonly tokenizer: Tokenizer) {}

  /** The token as text (special tokens by name; a partial UTF-8 character shows as U+FFFD). */
  text(id: number): string {
    let s = this.cache.get(id);
    if (s === undefined) {
      s = this.tokenizer.decode([id]);
      this.cache.set(id, s);
    }
    return s;
  }

  bytes(id: number): number[] {
    return Array.from(this.tokenizer.tokenBytes(id));
  }
}
