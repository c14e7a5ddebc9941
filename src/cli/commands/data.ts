import { extname } from "node:path";
import { writeTaskRowsJsonl, writeTaskRowsParquet } from "../../data/index.js";
import { noPositionals, parseFlags, requireString, usageError, type FlagSpec } from "../args.js";
import type { Command } from "../command.js";
import { checkOutFile } from "../../util/out-path.js";
import { forceFlag } from "./force-flag.js";
import { splitFlag, splitFromFlags, TASK_FLAGS, taskFromFlags } from "./task-flags.js";

const FLAGS: FlagSpec = {
  ...TASK_FLAGS,
  ...splitFlag("the split to write", "test"),
  out: {
    type: "string",
    value: "FILE.jsonl|FILE.parquet",
    description: "the file to write; its extension picks the format (required)",
  },
  ...forceFlag("replace an existing --out file"),
};

export const dataCommand: Command = {
  name: "data",
  summary: "write a task split as Agent-R1 rows (JSONL or parquet)",
  usage: "agent-r1 data --task NAME --out FILE [flags]",
  flags: FLAGS,
  async run(argv, io) {
    const { flags, positionals } = parseFlags("data", argv, FLAGS);
    noPositionals("data", positionals);
    const task = taskFromFlags("data", flags);
    const split = splitFromFlags("data", flags);
    const out = requireString("data", flags, "out");
    const ext = extname(out).toLowerCase();
    if (ext !== ".jsonl" && ext !== ".parquet")
      throw usageError("data", `--out ${out}: unknown file type '${ext}'; expected .jsonl or .parquet`);
    checkOutFile(out, { command: "data", force: flags.force === true });
    const rows = task.rows(split);
    if (ext === ".jsonl") writeTaskRowsJsonl(out, rows);
    else writeTaskRowsParquet(out, rows);
    io.out(`wrote ${rows.length} ${split} rows of '${task.name}' to ${out}`);
  },
};
