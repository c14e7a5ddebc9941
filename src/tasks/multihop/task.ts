/**
 * The multi-hop search task (the HotpotQA analogue): a generated world,
 * one document per entity, bridge / comparison / numeric questions (or, with
 * the option `hops`, long-horizon ones: long-horizon.ts), the
 * `search` (BM25) and `calculator` tools. Reward: normalized exact match
 * (rewards/qa.ts) shaped by the format component (rewards/format.ts); F1 is
 * reported by `score`.
 */
import { z } from "zod";
import { ToolEnv } from "../../agent/tool-env.js";
import { toolSchema } from "../../agent/tool.js";
import { templateJson } from "../../agent/formats/json-text.js";
import type { ChatMessage } from "../../model/chat-template.js";
import type { SearchDocument } from "../../data/documents.js";
import { exactMatch, f1Score } from "../../rewards/qa.js";
import { calculatorTool } from "../calc/calculator-tool.js";
import { envOutcome, scoreEpisode, type Judge } from "../common/episode.js";
import type { OutcomeInput } from "../../agent/tool-env.js";
import { searchCoverage } from "./coverage.js";
import { makeRow } from "../common/row.js";
import { GENERATION_ORDER, demoMode, itemForRow } from "../common/splits.js";
import { generatedSplitOptions, parseTaskOptions } from "../options.js";
import type { Split, Task, TaskRow } from "../types.js";
import { worldDocuments } from "./documents.js";
import { MULTIHOP_MISTAKES, multihopExpertTurns } from "./expert.js";
import { MULTIHOP_SYSTEM_PROMPT } from "./prompt.js";
import { generateQuestions, type Question } from "./questions.js";
import { buildSearchIndex, DEFAULT_TOP_K, searchText, searchTool, type SearchIndex } from "./search.js";
import { generateWorld, type World } from "./world.js";
import { typeMixOptions } from "./type-mix.js";
import { generateLongQuestions, HOPS_OVER, longHorizonWorldSizes, MAX_HOPS, MIN_HOPS } from "./long-horizon.js";

export const multihopOptionsSchema = z
  .strictObject({
    ...generatedSplitOptions(384),
    /** Documents the search tool returns per query. */
    topK: z.number().int().min(1).max(10).default(DEFAULT_TOP_K),
    ...typeMixOptions,
    /** Long-horizon questions (long-horizon.ts): each asks which of `hops` cities and companies was founded first. */
    hops: z
      .number()
      .int()
      .min(MIN_HOPS)
      .max(MAX_HOPS)
      .optional()
      .describe(
        "Long-horizon questions instead of the two-hop mix: which of `hops` cities and companies was founded first (one search each).",
      ),
    /** What long-horizon questions list (long-horizon.ts): over both kinds the answer is always a city. */
    hopsOver: z
      .enum(HOPS_OVER)
      .default("both")
      .describe("With hops: list cities and companies (both), or one kind only, so no prior names the answer."),
    /** With hops: w × the share of listed names searched by name, added to an episode that ends by itself (coverage.ts). */
    coverageReward: z
      .number()
      .min(0)
      .max(1)
      .default(0)
      .describe(
        "With hops: add this weight times the share of the question's listed names that a search asked for by name to every episode that ends by itself (a shaped reward; 0: off).",
      ),
  })
  .refine((o) => o.bridge + o.comparison + o.numeric > 0, {
    message: "at least one of bridge, comparison, numeric must be positive",
    path: ["bridge"],
  })
  .refine((o) => o.coverageReward === 0 || o.hops !== undefined, {
    message: "coverageReward applies to long-horizon questions only: set hops too",
    path: ["coverageReward"],
  });
export type MultihopOptions = z.output<typeof multihopOptionsSchema>;

export const MULTIHOP_DATA_SOURCE = "synthetic/multihop";

export const qaJudge: Judge = (answer, gold) => ({ correct: exactMatch(answer, gold), f1: f1Score(answer, gold).f1 });

export interface MultihopTask extends Task {
  readonly options: MultihopOptions;
  readonly world: World;
  readonly documents: SearchDocument[];
  readonly index: SearchIndex;
  readonly questions: Record<Split, Question[]>;
}

export function createMultihopTask(options: Record<string, unknown> = {}): MultihopTask {
  const o = parseTaskOptions("multihop", multihopOptionsSchema, options);
  const sizes = { train: o.train, val: o.val, test: o.test };
  const world = generateWorld(o.seed, o.hops !== undefined ? longHorizonWorldSizes(sizes, o.hops) : sizes);
  const documents = worldDocuments(world);
  const index = buildSearchIndex(documents);
  const search = searchTool(index, o.topK);
  const tools = [search, calculatorTool];
  const questions =
    o.hops !== undefined
      ? generateLongQuestions(world, o.seed, sizes, o.hops, o.hopsOver)
      : generateQuestions(world, o.seed, sizes, { bridge: o.bridge, comparison: o.comparison, numeric: o.numeric });
  const rows = (split: Split): TaskRow[] =>
    questions[split].map((q, index) =>
      makeRow({
        dataSource: MULTIHOP_DATA_SOURCE,
        ability: "multihop_qa",
        system: MULTIHOP_SYSTEM_PROMPT,
        question: q.question,
        answer: q.answer,
        split,
        index,
        tools: tools.map((t) => t.name),
        extra: { type: q.type },
      }),
    );
  const outcome = envOutcome(qaJudge);
  const outcomeReward =
    o.coverageReward === 0
      ? outcome
      : (i: OutcomeInput<TaskRow>) =>
          outcome(i) + o.coverageReward * searchCoverage(itemForRow("multihop", questions, i.row).searches, i.calls);
  const demonstrations = (rs: TaskRow[], opts: { seed: number; quality: number }): ChatMessage[][] =>
    rs.map((row, i) => {
      const { mode } = demoMode(opts.seed, i, opts.quality, MULTIHOP_MISTAKES);
      const q = itemForRow("multihop", questions, row);
      return [...row.prompt, ...multihopExpertTurns(q, mode, search, (query) => searchText(index, query, o.topK))];
    });
  return {
    name: "multihop",
    options: o,
    world,
    documents,
    index,
    questions,
    rows,
    makeEnv: () => new ToolEnv<TaskRow>({ tools, outcomeReward }),
    score: (t, row, tokenizer) => scoreEpisode(t, row, tokenizer, qaJudge),
    demonstrations,
    *corpus() {
      yield MULTIHOP_SYSTEM_PROMPT;
      for (const t of tools) yield templateJson(toolSchema(t)); // as the chat template lists it
      for (const d of documents) yield d.text;
      for (const split of GENERATION_ORDER) for (const q of questions[split]) yield `${q.question}\n${q.answer}`;
      for (const demo of demonstrations(rows("train"), { seed: o.seed, quality: 1 }))
        for (const m of demo.slice(2)) yield m.content;
    },
  };
}
