/** A CLI command: a thin wrapper that parses flags and calls the library. */
export interface CommandIO {
  out(line: string): void;
  err(line: string): void;
  /** Standard input as text (for piped input). */
  readStdin(): Promise<string>;
}

export interface Command {
  name: string;
  summary: string;
  usage: string;
  run(argv: string[], io: CommandIO): Promise<void>;
}
