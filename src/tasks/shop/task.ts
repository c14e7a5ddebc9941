/**
 * The shop task (a WebShop analogue): a generated catalogue, instructions
 * written from target products, a text shop played through one env_step
 * tool with the prompt rebuilt every step. Rows carry the goal (JSON) as
 * ground truth and the first rebuilt prompt. Score: em = success (0/1),
 * f1 = the purchase score, reward = what the env gave, formatOk = every
 * action was one readable env_step call.
 */
import { z } from "zod";
import type { Action } from "../../agent/env.js";
import { templateJson } from "../../agent/formats/json-text.js";
import type { ChatMessage } from "../../model/chat-template.js";
import { makeRow } from "../common/row.js";
import { demoMode, GENERATION_ORDER, itemForRow } from "../common/splits.js";
import { toolTurn } from "../common/turns.js";
import { generatedSplitOptions, parseTaskOptions } from "../options.js";
import type { EpisodeScore, Split, Task, TaskRow } from "../types.js";
import { generateCatalogue, MAX_CATALOGUE, type Catalogue } from "./catalogue.js";
import { ShopEnv } from "./env.js";
import { expertSteps, SHOP_MISTAKES, type ExpertStep } from "./expert.js";
import { generateGoals } from "./goals.js";
import type { Goal } from "./instructions.js";
import { SHOP_SYSTEM_PROMPT, SHOP_TOOLS } from "./prompt.js";
import { buildShopSearch, type ShopSearch } from "./search.js";

export const shopOptionsSchema = z
  .strictObject({
    ...generatedSplitOptions(512),
    /** Products in the catalogue (all splits shop in it; targets are disjoint). */
    products: z.number().int().min(50).max(MAX_CATALOGUE).default(2000),
  })
  .refine((o) => o.train + o.val + o.test <= o.products, {
    message: "train + val + test must not exceed products (each instruction has its own target product)",
    path: ["products"],
  });
export type ShopOptions = z.output<typeof shopOptionsSchema>;

export const SHOP_DATA_SOURCE = "synthetic/shop";

export interface ShopTask extends Task {
  readonly options: ShopOptions;
  readonly catalogue: Catalogue;
  readonly search: ShopSearch;
  readonly goals: Record<Split, Goal[]>;
  makeEnv(row: TaskRow): ShopEnv;
  /** The expert's steps for a row. */
  expert(row: TaskRow): ExpertStep[];
}

/** An action with only its text (the env reads nothing else), for playing demonstrations. */
const textAction = (text: string, turn: number): Action => ({
  text,
  tokens: [],
  logprobs: [],
  stopReason: "stop",
  turn,
});

/** The assistant turn of one step: a thought, then the env_step call. */
export function shopTurn(step: ExpertStep): ChatMessage {
  return toolTurn(step.thought, "env_step", { command: step.command });
}

export function createShopTask(options: Record<string, unknown> = {}): ShopTask {
  const o = parseTaskOptions("shop", shopOptionsSchema, options);
  const catalogue = generateCatalogue(o.seed, o.products);
  const search = buildShopSearch(catalogue);
  const goals = generateGoals(catalogue, search, o.seed, { train: o.train, val: o.val, test: o.test });
  const items = {} as Record<Split, (Goal & { question: string })[]>;
  for (const split of GENERATION_ORDER) items[split] = goals[split].map((g) => ({ ...g, question: g.instruction }));
  const makeEnv = () => new ShopEnv(catalogue, search);

  const rows = (split: Split): TaskRow[] =>
    goals[split].map((g, index) => {
      const row = makeRow({
        dataSource: SHOP_DATA_SOURCE,
        ability: "web_shop",
        system: SHOP_SYSTEM_PROMPT,
        question: g.instruction,
        answer: JSON.stringify(g),
        split,
        index,
        tools: ["env_step"],
        extra: { target: g.target, category: g.category, product_type: g.type },
      });
      const env = makeEnv();
      const first = env.reset(row);
      return { ...row, prompt: "prompt" in first ? (first.prompt as ChatMessage[]) : row.prompt };
    });

  const stepsFor = (row: TaskRow, mode: "expert" | (typeof SHOP_MISTAKES)[number]): ExpertStep[] => {
    const g = itemForRow("shop", items, row);
    return expertSteps(g, catalogue, search, mode) ?? expertSteps(g, catalogue, search, "expert")!;
  };

  /** One conversation per step: the rebuilt prompt, then the assistant's turn. */
  const demonstrations = (rs: TaskRow[], opts: { seed: number; quality: number }): ChatMessage[][] =>
    rs.flatMap((row, i) => {
      const { mode } = demoMode(opts.seed, i, opts.quality, SHOP_MISTAKES);
      const env = makeEnv();
      let obs = env.reset(row);
      const out: ChatMessage[][] = [];
      for (const [turn, step] of stepsFor(row, mode).entries()) {
        const turnMessage = shopTurn(step);
        out.push([...(obs as { prompt: ChatMessage[] }).prompt, turnMessage]);
        const r = env.step(textAction(turnMessage.content, turn));
        if (r.done) break;
        obs = r.observation;
      }
      return out;
    });

  return {
    name: "shop",
    options: o,
    catalogue,
    search,
    goals,
    tools: SHOP_TOOLS,
    rows,
    makeEnv,
    expert: (row) => stepsFor(row, "expert"),
    score: (t): EpisodeScore => {
      const last = t.steps[t.steps.length - 1];
      const formatOk = t.steps.length > 0 && t.steps.every((s) => s.info.wellFormed === true) ? 1 : 0;
      if (t.endReason !== "done" || !last) return { reward: 0, em: 0, f1: 0, formatOk };
      const score = typeof last.info.score === "number" ? last.info.score : 0;
      return { reward: last.reward, em: last.info.success === true ? 1 : 0, f1: score, formatOk };
    },
    demonstrations,
    *corpus() {
      yield SHOP_SYSTEM_PROMPT;
      for (const t of SHOP_TOOLS) yield templateJson(t);
      for (const p of catalogue.products)
        yield [
          p.title,
          p.description,
          p.features.join("; "),
          p.reviews.join(" "),
          ...Object.values(p.options).flat(),
        ].join("\n");
      for (const demo of demonstrations(rows("train").slice(0, 64), { seed: o.seed, quality: 1 }))
        for (const m of demo.slice(1)) yield m.content;
    },
  };
}
