/** Input checks shared by the engine entry points; errors name the item and the field. */
import { InputError } from "../util/errors.js";

export function assertTokens(tokens: number[], vocabSize: number, what: string): void {
  if (tokens.length === 0) throw new InputError(`${what} is empty`);
  const bad = tokens.find((t) => !Number.isInteger(t) || t < 0 || t >= vocabSize);
  if (bad !== undefined) throw new InputError(`${what}: token ${bad} is outside the vocabulary [0, ${vocabSize})`);
}

export function assertFinite(values: number[], what: string): void {
  if (values.some((x) => !Number.isFinite(x))) throw new InputError(`${what} holds a non-finite number`);
}

/**
 * Scoring (computeLogprobs, the losses) divides float32 logits by the temperature:
 * below this, logits / temperature overflows to Infinity and the logprobs come out NaN.
 */
export const MIN_SCORING_TEMPERATURE = 1e-30;

export function assertScoringTemperature(t: number, what: string): void {
  if (!(t >= MIN_SCORING_TEMPERATURE && t < Infinity)) {
    throw new InputError(
      `${what} must be a finite number >= ${MIN_SCORING_TEMPERATURE} (scoring divides float32 logits by it), got ${t}`,
    );
  }
}
