#!/usr/bin/env node
/** agent-r1: a thin command line over the library. */
import { realpathSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { formatError } from "../util/errors.js";
import { settings } from "../util/settings.js";
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

export const COMMANDS: Command[] = [demoCommand, mainJobCommand, trainCommand, evalCommand, pretrainCommand, tokenizerCommand, dataCommand, exportCommand, initModelCommand, generateCommand, scoreCommand, tokenizeCommand, serveCommand, dashboardCommand, chatCommand];

function help(): string {
  const width = Math.max(...COMMANDS.map((c) => c.name.length));
  return [
    "usage: agent-r1 <command> [flags]",
    "",
    ...COMMANDS.map((c) => `  ${c.name.padEnd(width)}  ${c.summary}`),
    "",
    "agent-r1 <command> --help shows a command's flags.",
  ].join("\n");
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

/** Runs one command line; returns the exit code. */
export async function runCli(argv: string[], io: CommandIO = stdio): Promise<number> {
  const [name, ...rest] = argv;
  if (!name || name === "--help" || name === "-h" || name === "help") {
    io.out(help());
    return name ? 0 : 1;
  }
  const cmd = COMMANDS.find((c) => c.name === name);
  if (!cmd) {
    io.err(`error: unknown command '${name}'; commands: ${COMMANDS.map((c) => c.name).join(", ")}`);
    return 2;
  }
  if (rest.includes("--help") || rest.includes("-h")) {
    io.out(`${cmd.summary}\nusage: ${cmd.usage}`);
    return 0;
  }
  try {
    await cmd.run(rest, io);
    return 0;
  } catch (e) {
    io.err(formatError(e));
    if (settings().debug) io.err(String((e as Error)?.stack));
    return 1;
  }
}

// Run only when executed as the bin (possibly through npm's symlink), not when imported by tests.
const invokedAs = process.argv[1] ? realpathSync(process.argv[1]) : "";
if (invokedAs === fileURLToPath(import.meta.url)) {
  runCli(process.argv.slice(2)).then((code) => {
    process.exitCode = code;
  });
}
