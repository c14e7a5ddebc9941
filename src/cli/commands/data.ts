import { extname } from "node:path";
import { writeTaskRowsJsonl, writeTaskRowsParquet } from "../../data/index.js";
import { InputError } from "../../util/errors.js";
import { parseFlags, requireString } from "../args.js";
import type { Command } from "../command.js";
import { splitFromFlags, TASK_FLAGS, taskFromFlags } from "./task-flags.js";

export const dataCommand: Command = {
  name: "data",
  summary: "write a task split as Agent-R1 rows (JSONL or parquet)",
  usage: "agent-r1 data --task multihop|calc --split train|val|test --out FILE.jsonl|FILE.parquet [--option name=value ...]",
  async run(argv, io) {
    const { flags } = parseFlags("data", argv, { ...TASK_FLAGS, split: { type: "string" }, out: { type: "string" } });
    const task = taskFromFlags("data", flags);
    const split = splitFromFlags("data", flags);
    const out = requireString("data", flags, "out");
    const ext = extname(out).toLowerCase();
    const rows = task.rows(split);
    if (ext === ".jsonl") writeTaskRowsJsonl(out, rows);
    else if (ext === ".parquet") writeTaskRowsParquet(out, rows);
    else throw new InputError(`data: --out ${out}: unknown file type '${ext}'; expected .jsonl or .parquet`);
    io.out(`wrote ${rows.length} ${split} rows of '${task.name}' to ${out}`);
  },
};
