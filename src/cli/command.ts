/** A CLI command: a thin wrapper that parses flags and calls the library. */
import { createInterface } from "node:readline";
import type { FlagSpec } from "./args.js";

export interface CommandIO {
  out(line: string): void;
  err(line: string): void;
  /** Standard input as text (for piped input). */
  readStdin(): Promise<string>;
  /**
   * Standard input line by line as it arrives (interactive commands). `prompt`
   * is shown before each line when stdin is a terminal. Optional: commands fall
   * back to splitting `readStdin()`.
   */
  readLines?(prompt?: string): AsyncIterable<string>;
  /** True when stdin is a terminal (a person typing). Default false. */
  interactive?: boolean;
  /** True when `out` goes to a terminal that shows ANSI colors. Default false. */
  color?: boolean;
}

export interface Command {
  name: string;
  summary: string;
  /** The synopsis: required flags and positionals, `[flags]` for the rest (listed from `flags`). */
  usage: string;
  /** Every flag the command takes, each with its --help line. */
  flags: FlagSpec;
  run(argv: string[], io: CommandIO): Promise<void>;
}

/** process.stdin line by line through node:readline; ends at EOF (or Ctrl-C / Ctrl-D on a terminal). */
export async function* stdinLines(prompt = ""): AsyncGenerator<string> {
  const terminal = process.stdin.isTTY === true;
  const rl = createInterface({ input: process.stdin, output: terminal ? process.stdout : undefined, terminal });
  rl.on("SIGINT", () => rl.close()); // without a listener readline would only pause on Ctrl-C
  const lines = rl[Symbol.asyncIterator]();
  try {
    for (;;) {
      if (terminal && prompt) {
        rl.setPrompt(prompt);
        rl.prompt();
      }
      const next = await lines.next();
      if (next.done) return;
      yield next.value;
    }
  } finally {
    rl.close();
  }
}

/** Lines of an io's stdin: live when it can read them one by one, else the whole text split. */
export async function* inputLines(io: CommandIO, prompt?: string): AsyncGenerator<string> {
  if (io.readLines) {
    yield* io.readLines(prompt);
    return;
  }
  const text = await io.readStdin();
  const lines = text.split(/\r?\n/);
  if (lines[lines.length - 1] === "") lines.pop();
  yield* lines;
}
