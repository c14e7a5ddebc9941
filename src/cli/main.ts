#!/usr/bin/env node
/** agent-r1: a thin command line over the library. */
import { realpathSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { formatError, UsageError } from "../util/errors.js";
import { packageVersion } from "../util/package-root.js";
import { settings } from "../util/settings.js";
import { flagLines } from "./args.js";
import { stdinLines, type Command, type CommandIO } from "./command.js";
import { initModelCommand } from "./commands/init-model.js";
import { scoreCommand } from "./commands/score.js";
import { generateCommand } from "./commands/generate.js";
import { tokenizeCommand } from "./commands/tokenize.js";
import { demoCommand } from "./commands/demo.js";
import { trainCommand } from "./commands/train.js";
import { exportCommand } from "./commands/export.js";
import { mainJobCommand } from "./commands/main-job.js";
import { pretrainCommand } from "./commands/pretrain.js";
import { evalCommand } from "./commands/eval.js";
import { dataCommand } from "./commands/data.js";
import { tokenizerCommand } from "./commands/tokenizer.js";
import { serveCommand } from "./commands/serve.js";
import { dashboardCommand } from "./commands/dashboard.js";
import { chatCommand } from "./commands/chat.js";

export const COMMANDS: Command[] = [
  demoCommand,
  mainJobCommand,
  trainCommand,
  evalCommand,
  pretrainCommand,
  tokenizerCommand,
  dataCommand,
  exportCommand,
  initModelCommand,
  generateCommand,
  scoreCommand,
  tokenizeCommand,
  serveCommand,
  dashboardCommand,
  chatCommand,
];

/** Exit codes: 0 done, 1 an error (bad input file, config, failed run), 2 a mistake in the command line. */
export const EXIT = { ok: 0, error: 1, usage: 2 } as const;

function help(): string {
  const width = Math.max(...COMMANDS.map((c) => c.name.length));
  return [
    "usage: agent-r1 <command> [flags]",
    "",
    ...COMMANDS.map((c) => `  ${c.name.padEnd(width)}  ${c.summary}`),
    "",
    "agent-r1 <command> --help shows a command's flags.",
    "agent-r1 --version prints the version.",
  ].join("\n");
}

/** `agent-r1 CMD --help`: the summary, the usage line, then one line per flag. */
export function commandHelp(cmd: Command): string {
  return [cmd.summary, `usage: ${cmd.usage}`, "", "flags:", ...flagLines(cmd.flags)].join("\n");
}

export const stdio: CommandIO = {
  out: (line) => process.stdout.write(line + "\n"),
  err: (line) => process.stderr.write(line + "\n"),
  readStdin: async () => {
    const chunks: Buffer[] = [];
    for await (const c of process.stdin) chunks.push(c as Buffer);
    return Buffer.concat(chunks).toString("utf8");
  },
  readLines: stdinLines,
  interactive: process.stdin.isTTY === true,
  color: process.stdout.isTTY === true && !process.env.NO_COLOR,
};

/** Runs one command line; returns the exit code (EXIT). */
export async function runCli(argv: string[], io: CommandIO = stdio): Promise<number> {
  const [name, ...rest] = argv;
  if (name === "--version" || name === "-v" || name === "version") {
    io.out(packageVersion());
    return EXIT.ok;
  }
  if (name === "--help" || name === "-h" || name === "help") {
    const about = COMMANDS.find((c) => c.name === rest[0]);
    io.out(about ? commandHelp(about) : help());
    return EXIT.ok;
  }
  if (!name) {
    io.err(help());
    return EXIT.usage;
  }
  const cmd = COMMANDS.find((c) => c.name === name);
  if (!cmd) {
    io.err(`error: unknown command '${name}'; commands: ${COMMANDS.map((c) => c.name).join(", ")}`);
    return EXIT.usage;
  }
  if (rest.includes("--help") || rest.includes("-h")) {
    io.out(commandHelp(cmd));
    return EXIT.ok;
  }
  return runCommand(cmd, rest, io);
}

/** Runs a command: 0, or one error line and EXIT.usage for a UsageError, EXIT.error for any other. */
export async function runCommand(cmd: Command, argv: string[], io: CommandIO): Promise<number> {
  try {
    await cmd.run(argv, io);
    return EXIT.ok;
  } catch (e) {
    io.err(formatError(e));
    if (settings().debug) io.err(String((e as Error)?.stack));
    return e instanceof UsageError ? EXIT.usage : EXIT.error;
  }
}

// Run only when executed as the bin (possibly through npm's symlink), not when imported by tests.
const invokedAs = process.argv[1] ? realpathSync(process.argv[1]) : "";
if (invokedAs === fileURLToPath(import.meta.url)) {
  runCli(process.argv.slice(2)).then((code) => {
    process.exitCode = code;
  });
}
