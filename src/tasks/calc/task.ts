/**
 * The calculator task (the GSM8K analogue): generated word problems, a
 * `calculator` tool, reward = number match (rewards/math.ts) shaped by the
 * format component (rewards/format.ts).
 */
import { z } from "zod";
import { ToolEnv } from "../../agent/tool-env.js";
import { toolSchema } from "../../agent/tool.js";
import { templateJson } from "../../agent/formats/json-text.js";
import type { ChatMessage } from "../../model/chat-template.js";
import { numberAnswerCorrect } from "../../rewards/math.js";
import { Rng } from "../../util/rng.js";
import { envOutcome, scoreEpisode, type Judge } from "../common/episode.js";
import { makeRow } from "../common/row.js";
import { GENERATION_ORDER, demoMode, itemForRow, shuffle, splitStream } from "../common/splits.js";
import { generatedSplitOptions, parseTaskOptions } from "../options.js";
import type { Split, Task, TaskRow } from "../types.js";
import { evaluateArithmetic } from "./calculator.js";
import { calculatorTool } from "./calculator-tool.js";
import { CALC_MISTAKES, calcExpertTurns } from "./expert.js";
import { CALC_TEMPLATE_IDS, makeProblem, type CalcProblem } from "./problems.js";
import { CALC_SYSTEM_PROMPT } from "./prompt.js";

export const calcOptionsSchema = z.strictObject({
  ...generatedSplitOptions(512),
});
export type CalcOptions = z.output<typeof calcOptionsSchema>;

export const CALC_DATA_SOURCE = "synthetic/calc";

export const calcJudge: Judge = (answer, gold) => {
  const correct = numberAnswerCorrect(answer, gold);
  return { correct, f1: correct };
};

/** Problems per split; no question text appears in two splits. */
export function generateCalcProblems(o: CalcOptions): Record<Split, CalcProblem[]> {
  const seen = new Set<string>();
  const out = { train: [], val: [], test: [] } as Record<Split, CalcProblem[]>;
  for (const split of GENERATION_ORDER) {
    const rng = new Rng(o.seed, 10 + splitStream(split));
    const n = o[split];
    for (let i = 0, tries = 0; out[split].length < n; i++) {
      if (++tries > 50 * n + 100) throw new Error(`internal: could not generate ${n} distinct ${split} problems`);
      const p = makeProblem(rng, CALC_TEMPLATE_IDS[i % CALC_TEMPLATE_IDS.length], evaluateArithmetic);
      if (seen.has(p.question)) continue;
      seen.add(p.question);
      out[split].push(p);
    }
    shuffle(rng, out[split]);
  }
  return out;
}

export function createCalcTask(options: Record<string, unknown> = {}): Task {
  const o = parseTaskOptions("calc", calcOptionsSchema, options);
  const problems = generateCalcProblems(o);
  const tools = [calculatorTool];
  const toRow = (p: CalcProblem, split: Split, index: number): TaskRow =>
    makeRow({
      dataSource: CALC_DATA_SOURCE,
      ability: "math",
      system: CALC_SYSTEM_PROMPT,
      question: p.question,
      answer: String(p.answer),
      split,
      index,
      tools: tools.map((t) => t.name),
      extra: { template: p.template, expression: p.expression },
    });
  const rows = (split: Split) => problems[split].map((p, i) => toRow(p, split, i));
  const demonstrations = (rs: TaskRow[], opts: { seed: number; quality: number }): ChatMessage[][] =>
    rs.map((row, i) => {
      const { mode, rng } = demoMode(opts.seed, i, opts.quality, CALC_MISTAKES);
      return [...row.prompt, ...calcExpertTurns(itemForRow("calc", problems, row), mode, rng)];
    });
  return {
    name: "calc",
    rows,
    makeEnv: () => new ToolEnv<TaskRow>({ tools, outcomeReward: envOutcome(calcJudge) }),
    score: (t, row, tokenizer) => scoreEpisode(t, row, tokenizer, calcJudge),
    demonstrations,
    *corpus() {
      yield CALC_SYSTEM_PROMPT;
      for (const t of tools) yield templateJson(toolSchema(t)); // as the chat template lists it
      for (const split of GENERATION_ORDER) for (const p of problems[split]) yield `${p.question}\n${p.answer}`;
      for (const demo of demonstrations(rows("train"), { seed: o.seed, quality: 1 }))
        for (const m of demo.slice(2)) yield m.content;
    },
  };
}
