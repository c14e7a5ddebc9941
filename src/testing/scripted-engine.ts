/**
 * A scripted Engine for tests of envs, tools and loops (no model): `sample` returns predetermined token ids (a
 * script's text encoded, or ids given outright), honoring maxTokens and stop
 * ids/strings the way the local engine does (a stop is kept in the output).
 * Logprobs are a fixed function of (token, position) so tests can check they
 * travel unchanged. Everything but `sample` throws.
 */
import type { Engine, SampleResult, SamplingParams, StopReason } from "../engine/types.js";
import type { Tokenizer } from "../model/tokenizer.js";

export type Reply = string | { tokens: number[] };

export interface SampleCall {
  prompt: number[];
  /** The prompt decoded, for scripts that answer by content. */
  text: string;
  params: SamplingParams;
  /** 0-based index of this call on the engine. */
  index: number;
}

export const fakeLogprob = (token: number, position: number) => -((token % 97) / 100 + position / 1000 + 0.001);

export class ScriptedEngine implements Engine {
  readonly calls: SampleCall[] = [];

  constructor(
    readonly tokenizer: Tokenizer,
    private readonly respond: (call: SampleCall) => Reply | Promise<Reply>,
    private readonly opts: { delayMs?: number } = {},
  ) {}

  async sample(prompt: number[], params: SamplingParams = {}): Promise<SampleResult> {
    const call: SampleCall = {
      prompt: prompt.slice(),
      text: this.tokenizer.decode(prompt),
      params,
      index: this.calls.length,
    };
    this.calls.push(call);
    await new Promise((r) => setTimeout(r, this.opts.delayMs ?? 0));
    const reply = await this.respond(call);
    const all = typeof reply === "string" ? this.tokenizer.encode(reply) : reply.tokens.slice();
    const { tokens, stopReason } = this.cut(all, params);
    return { sequences: [{ tokens, logprobs: tokens.map(fakeLogprob), stopReason }] };
  }

  private cut(all: number[], params: SamplingParams): { tokens: number[]; stopReason: StopReason } {
    const stops = params.stop ?? (this.tokenizer.eosTokenId !== undefined ? [this.tokenizer.eosTokenId] : []);
    const ids = new Set(stops.filter((s): s is number => typeof s === "number"));
    const strings = stops.filter((s): s is string => typeof s === "string" && s.length > 0);
    const max = params.maxTokens ?? 256;
    for (let i = 0; i < Math.min(all.length, max); i++) {
      const hitId = ids.has(all[i]);
      const hitString =
        strings.length > 0 && strings.some((s) => this.tokenizer.decode(all.slice(0, i + 1)).includes(s));
      if (hitId || hitString) return { tokens: all.slice(0, i + 1), stopReason: "stop" };
    }
    return { tokens: all.slice(0, max), stopReason: "length" };
  }

  computeLogprobs(): never {
    throw new Error("ScriptedEngine only samples");
  }
  forwardBackward(): never {
    throw new Error("ScriptedEngine only samples");
  }
  optimStep(): never {
    throw new Error("ScriptedEngine only samples");
  }
  save(): never {
    throw new Error("ScriptedEngine only samples");
  }
  load(): never {
    throw new Error("ScriptedEngine only samples");
  }
}

/** Assistant turns already in a ChatML prompt (the turn about to be sampled is not counted). */
export function assistantTurns(promptText: string): number {
  return promptText.split("<|im_start|>assistant\n").length - 2;
}
