/**
 * A sequence's text while it is being sampled, for streaming: tokens are
 * decoded as they arrive (a character split across tokens waits for its last
 * byte), and only text certain to be in the final answer is released. Text
 * that could be the start of a stop string is held back; with tools, so is
 * everything from `<tool_call>` on (the calls are sent at the end) and trailing
 * whitespace (the content is trimmed around the calls). What was released is
 * always a prefix of the final text, so `rest(final)` completes it exactly.
 */
import { IncrementalDecoder, type Tokenizer } from "../model/tokenizer.js";
import type { Stops } from "./sampling-options.js";

const TOOL_CALL_OPEN = "<tool_call>";

export class LiveText {
  private readonly decoder: IncrementalDecoder;
  private text = "";
  private sent = 0;
  /** Nothing more is released (a stop or a tool call was seen). */
  private closed = false;
  /** Tokens reported so far. */
  tokens = 0;

  constructor(
    tokenizer: Tokenizer,
    private readonly stops: Stops,
    private readonly tools: boolean,
  ) {
    this.decoder = new IncrementalDecoder(tokenizer, { skipSpecialTokens: true });
  }

  /** Takes the next sampled token; returns the newly releasable text ("" when none). */
  push(token: number): string {
    this.tokens++;
    if (this.closed) return "";
    // The stop token ends the sequence and is not part of its text.
    if (this.stops.ids.has(token)) {
      this.closed = true;
      return "";
    }
    this.text += this.decoder.push(token);
    const text = this.text;
    let limit = text.length;
    const hits = this.stops.strings.map((s) => text.indexOf(s)).filter((i) => i >= 0);
    if (hits.length > 0) {
      limit = Math.min(...hits);
      this.closed = true;
    } else {
      limit -= heldSuffix(text, this.stops.strings);
    }
    if (this.tools) {
      // The content of an answer with calls is trimmed: leading whitespace could vanish, so such an answer is sent at the end.
      if (/^\s/.test(text)) {
        this.closed = true;
        return "";
      }
      const open = text.indexOf(TOOL_CALL_OPEN);
      if (open >= 0) {
        limit = Math.min(limit, open);
        this.closed = true;
      } else {
        limit = Math.min(limit, text.length - heldSuffix(text, [TOOL_CALL_OPEN]));
      }
      limit = text.slice(0, limit).trimEnd().length;
    }
    if (limit <= this.sent) return "";
    const out = text.slice(this.sent, limit);
    this.sent = limit;
    return out;
  }

  /** What is left of `final` (the answer's text or content) after what was released. */
  rest(final: string): string {
    const sent = this.text.slice(0, this.sent);
    return final.startsWith(sent) ? final.slice(sent.length) : "";
  }
}

/** Length of the longest end of `text` that is a proper start of one of `strings`. */
export function heldSuffix(text: string, strings: string[]): number {
  let best = 0;
  for (const s of strings) {
    for (let k = Math.min(s.length - 1, text.length); k > best; k--) {
      if (text.endsWith(s.slice(0, k))) {
        best = k;
        break;
      }
    }
  }
  return best;
}
