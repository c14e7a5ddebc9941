/**
 * Typed, actionable errors. Each names the input at fault (a file, field or row)
 * so the CLI can print one line and exit non-zero instead of a stack trace.
 */
export class AgentR1Error extends Error {
  constructor(
    message: string,
    readonly hint?: string,
  ) {
    super(message);
    this.name = new.target.name;
  }
}

/** A model directory or one of its files is missing, malformed or inconsistent. */
export class ModelFormatError extends AgentR1Error {
  constructor(
    readonly file: string,
    readonly field: string | undefined,
    message: string,
    hint?: string,
  ) {
    super(`${file}${field ? ` (${field})` : ""}: ${message}`, hint);
  }
}

/** Bad user input outside model files: a dataset row, a CLI flag, a config key. */
export class InputError extends AgentR1Error {}

/**
 * A mistake in the command line itself: an unknown flag, a missing or malformed flag value, a
 * missing required flag, a stray argument, flags that exclude each other. The CLI exits 2 for
 * these (1 for every other error), as Unix tools do; library callers see an InputError.
 */
export class UsageError extends InputError {}

/** One line for the terminal: the message, plus the hint when there is one. */
export function formatError(err: unknown): string {
  if (err instanceof AgentR1Error) return `error: ${err.message}${err.hint ? ` (hint: ${err.hint})` : ""}`;
  if (err instanceof Error) return `error: ${err.message}`;
  return `error: ${String(err)}`;
}
