/**
 * The asample fields newer SDKs may send that `serve --tinker` does not compute, each refused with
 * a 400 naming it and saying so (never silently ignored, so a caller never reads an answer that
 * lacks what it asked for): top-k prompt or sample logprobs, target prompt logprobs, alternative
 * prompt tokens, prompt logprobs of the last n tokens only, stability info. Left out, null, 0 or
 * false are what a client sends that does not ask for them. And the acknowledgement of a sample:
 * its request id, with one id per sequence for the versions that have them (from SDK 0.25).
 */
import { randomUUID } from "node:crypto";
import { TinkerError } from "../../engine/remote/tinker-error.js";
import { sendsSampleIds } from "./sdk-support.js";

/** Field -> what is refused in it. */
const REFUSED: [string, string][] = [
  ["topk_prompt_logprobs", "top-k prompt logprobs"],
  ["topk_sample_logprobs", "top-k logprobs of sampled tokens"],
  ["target_prompt_logprobs", "logprobs of chosen tokens at prompt positions"],
  ["prompt_alt_tokens_k", "alternative tokens drawn at prompt positions"],
  ["prompt_logprobs_last_n", "prompt logprobs of the last n tokens only (ask for all with prompt_logprobs)"],
  ["record_stability_info", "stability info"],
];

/** A 400 for the first field that asks for something this server does not compute. */
export function refuseUnsupportedSampling(body: Record<string, unknown>): void {
  for (const [field, what] of REFUSED) {
    const v = body[field];
    if (v === undefined || v === null || v === 0 || v === false) continue;
    throw new TinkerError(
      `${field}: this server does not compute ${what}; leave it out (or 0)`,
      "sample without it: agent-r1's engines do not ask for it",
    );
  }
}

/** The asample acknowledgement for a session of version `sdk`. */
export function sampleAck(requestId: string, n: number, sdk: string | undefined): Record<string, unknown> {
  if (!sendsSampleIds(sdk)) return { request_id: requestId };
  return { request_id: requestId, sample_sequence_ids: Array.from({ length: n }, () => `seq-${randomUUID()}`) };
}
