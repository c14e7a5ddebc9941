/** The datums of a forwardBackward call against the loss: consistent lengths and the fields the loss reads. */
import type { Datum } from "./types.js";
import type { ResolvedLoss } from "../rl/policy-loss.js";
import { InputError } from "../util/errors.js";

export function validateDatums(datums: Datum[], loss: ResolvedLoss): void {
  if (datums.length === 0) throw new InputError("forwardBackward needs at least one datum");
  const need: (keyof Datum)[] = [];
  if (loss.type !== "cross_entropy") need.push("advantages", "logprobs");
  if (loss.kl) need.push("refLogprobs");
  datums.forEach((d, i) => {
    const n = d.tokens.length;
    if (n === 0) throw new InputError(`datum ${i}: tokens is empty`);
    for (const key of ["targetTokens", "weights", ...need] as (keyof Datum)[]) {
      const arr = d[key] as number[] | undefined;
      if (!arr)
        throw new InputError(
          `datum ${i}: ${key} is required by loss '${loss.type}'${key === "refLogprobs" ? " with a KL term" : ""}`,
        );
      if (arr.length !== n) throw new InputError(`datum ${i}: ${key} has length ${arr.length}, tokens has ${n}`);
    }
    for (const key of ["weights", "advantages", "logprobs", "refLogprobs"] as const) {
      const arr = d[key];
      if (arr && arr.some((x) => !Number.isFinite(x)))
        throw new InputError(`datum ${i}: ${key} holds a non-finite number`);
    }
    if (d.sequence !== undefined && !Number.isSafeInteger(d.sequence))
      throw new InputError(`datum ${i}: sequence must be an integer, got ${d.sequence}`);
  });
}
