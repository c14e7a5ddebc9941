/**
 * Main-job benchmark: the same run as `agent-r1 main` (GRPO on multi-hop
 * search from the committed base, held-out test split evaluated greedily
 * before and after), timed end to end. Ends with one JSON line:
 *   {"base_em":x,"final_em":y,"minutes":m,"tool_calls_base":a,"tool_calls_final":b}
 *   npm run build && node dist/bench/demo.js [--out DIR] [--budget-minutes M] [key.path=value ...]
 */
import { parseArgs } from "node:util";
import { stdio } from "../src/cli/main.js";
import { MAIN_JOB_DEFAULTS, mainJob, reportLines } from "../src/cli/commands/main-job.js";

const { values: args, positionals } = parseArgs({
  options: {
    out: { type: "string" },
    "budget-minutes": { type: "string" },
    config: { type: "string" },
    base: { type: "string" },
  },
  allowPositionals: true,
});

const res = await mainJob(
  {
    recipe: args.config ?? MAIN_JOB_DEFAULTS.recipe(),
    base: args.base ?? MAIN_JOB_DEFAULTS.base(),
    out: args.out ?? `runs/bench-demo-${new Date().toISOString().replace(/[:.]/g, "-")}`,
    overrides: positionals,
    budgetMinutes:
      args["budget-minutes"] !== undefined ? Number(args["budget-minutes"]) : MAIN_JOB_DEFAULTS.budgetMinutes,
  },
  stdio,
);
for (const l of reportLines(res, "multihop")) console.log(l);
const r4 = (x: number) => Math.round(x * 1e4) / 1e4;
console.log(
  JSON.stringify({
    base_em: r4(res.before.em),
    final_em: r4(res.after.em),
    minutes: Math.round(res.minutes * 100) / 100,
    tool_calls_base: r4(res.before.toolCalls),
    tool_calls_final: r4(res.after.toolCalls),
  }),
);
