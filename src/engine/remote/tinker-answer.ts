/**
 * An answer of a Tinker-protocol server as the client reads it: which server, which request, and
 * readers for its JSON fields that accept only what the protocol allows. Anything else is a
 * TinkerAnswerError naming the server, the request and the field, and the call fails with it.
 * Optional fields may be left out or null; a field that is there must have its type.
 */
import { TinkerAnswerError, type Fault } from "./tinker-error.js";

/** A value from a server in a message: short, on one line. */
export function shownValue(x: unknown): string {
  if (x === undefined) return "missing";
  if (typeof x === "number") return String(x);
  const s = JSON.stringify(x) ?? String(x);
  return s.length > 40 ? `${s.slice(0, 40)}...` : s;
}

/** "is missing", or "is <value>, not <want>". */
export function isNot(x: unknown, want: string): string {
  return x === undefined ? "is missing" : `is ${shownValue(x)}, not ${want}`;
}

export class Answer {
  /** `request` names the request: its type, and its id or seq_id where it has one ("asample (request r-1)"). */
  constructor(
    readonly server: string,
    readonly request: string,
  ) {}

  /** The error for `field`; `problem` reads after it ("is -3, not a count"). */
  fault(field: string, problem: string): TinkerAnswerError {
    return new TinkerAnswerError(this.server, this.request, field, problem);
  }

  /** This answer's faults as a function (for the checks shared with other clients). */
  get faults(): Fault {
    return (field, problem) => this.fault(field, problem);
  }

  /** A JSON object (not null, not a list). */
  object(x: unknown, field: string): Record<string, unknown> {
    if (typeof x !== "object" || x === null || Array.isArray(x)) throw this.fault(field, isNot(x, "an object"));
    return x as Record<string, unknown>;
  }

  /** A required non-empty string field. */
  string(o: Record<string, unknown>, key: string): string {
    const v = o[key];
    if (typeof v !== "string" || v === "") throw this.fault(key, isNot(v, "a non-empty string"));
    return v;
  }

  /** An optional boolean field. */
  optionalBoolean(o: Record<string, unknown>, key: string): boolean | undefined {
    const v = o[key];
    if (v === undefined || v === null) return undefined;
    if (typeof v !== "boolean") throw this.fault(key, isNot(v, "true or false"));
    return v;
  }

  /** An optional integer field of at least `min`. */
  optionalInteger(o: Record<string, unknown>, key: string, min: number, field = key): number | undefined {
    const v = o[key];
    if (v === undefined || v === null) return undefined;
    if (!Number.isSafeInteger(v) || (v as number) < min) throw this.fault(field, isNot(v, `an integer >= ${min}`));
    return v as number;
  }

  /** An optional map of names to numbers (metrics). */
  optionalNumbers(o: Record<string, unknown>, key: string): Record<string, number> | undefined {
    const v = o[key];
    if (v === undefined || v === null) return undefined;
    const m = this.object(v, key);
    for (const [k, x] of Object.entries(m))
      if (typeof x !== "number") throw this.fault(`${key}.${k}`, isNot(x, "a number"));
    return m as Record<string, number>;
  }
}
