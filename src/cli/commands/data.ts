import { extname } from "node:path";
import { writeTaskRowsJsonl, writeTaskRowsParquet } from "../../data/index.js";
import { InputError } from "../../util/errors.js";
import { parseFlags, requireString } from "../args.js";
import type { Command } from "../command.js";
import { checkOutFile, FORCE_FLAG } from "../../util/out-path.js";
import { splitFromFlags, TASK_FLAGS, taskFromFlags } from "./task-flags.js";

export const dataCommand: Command = {
  name: "data",
  summary: "write a task split as Agent-R1 rows (JSONL or parquet)",
  usage: "agent-r1 data --task multihop|calc --split train|val|test --out FILE.jsonl|FILE.parquet [--option name=value ...] [--force]  (--force replaces an existing FILE)",
  async run(argv, io) {
    const { flags } = parseFlags("data", argv, { ...TASK_FLAGS, split: { type: "string" }, out: { type: "string" }, ...FORCE_FLAG });
    const task = taskFromFlags("data", flags);
    const split = splitFromFlags("data", flags);
    const out = requireString("data", flags, "out");
    const ext = extname(out).toLowerCase();
    if (ext !== ".jsonl" && ext !== ".parquet") throw new InputError(`data: --out ${out}: unknown file type '${ext}'; expected .jsonl or .parquet`);
    checkOutFile(out, { command: "data", force: flags.force === true });
    const rows = task.rows(split);
    if (ext === ".jsonl") writeTaskRowsJsonl(out, rows);
    else writeTaskRowsParquet(out, rows);
    io.out(`wrote ${rows.length} ${split} rows of '${task.name}' to ${out}`);
  },
};
