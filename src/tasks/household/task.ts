/**
 * The household task (the ALFWorld analogue): generated houses, six goal
 * kinds, one `env_step` tool, a prompt rebuilt from the state every step.
 * Reward 1 on success (at the end), 0 per step (or −invalidPenalty for an
 * invalid one, an option, 0 by default); 20 steps at most by default
 * (the env's own limit: run it with rollout.maxTurns >= maxSteps).
 *
 * Splits: train and val are "seen" (layouts from one pool over the seen
 * vocabulary; val reuses train's layouts with new goals and placements),
 * test is "unseen" (its own layouts over held-out receptacle and object
 * names). See tasks.ts.
 */
import { z } from "zod";
import { templateJson } from "../../agent/formats/json-text.js";
import { toolSchema } from "../../agent/tool.js";
import type { ChatMessage } from "../../model/chat-template.js";
import { actionTexts } from "../common/episode.js";
import { makeRow } from "../common/row.js";
import { GENERATION_ORDER, demoMode } from "../common/splits.js";
import { generatedSplitOptions, parseTaskOptions } from "../options.js";
import type { Split, Task, TaskRow } from "../types.js";
import { demonstrateRow, HOUSEHOLD_MISTAKES } from "./demos.js";
import {
  DEFAULT_MAX_STEPS,
  envStepTool,
  HouseholdEnv,
  openingPrompt,
  readCommand,
  type HouseholdEpisode,
} from "./env.js";
import { HOUSEHOLD_SYSTEM_PROMPT } from "./prompt.js";
import { generateHouseholdTasks, type HouseholdItem, type KindWeights } from "./tasks.js";

const weight = (what: string) => z.number().nonnegative().default(1).describe(`Relative weight of ${what} tasks.`);

export const householdOptionsSchema = z
  .strictObject({
    ...generatedSplitOptions(512),
    /** Layouts of the seen pool (train and val draw from it). */
    layouts: z.number().int().min(4).max(10_000).default(40),
    /** Layouts of the unseen pool (test draws from it). */
    unseenLayouts: z.number().int().min(4).max(10_000).default(12),
    /** Steps per episode at most (the env ends the episode there). */
    maxSteps: z.number().int().min(15).max(100).default(DEFAULT_MAX_STEPS),
    /** Reward added per invalid step, as a cost (Agent-R1's WebShop and verl-agent's ALFWorld use 1/100 of success). */
    invalidPenalty: z
      .number()
      .min(0)
      .max(1)
      .default(0)
      .describe("Reward taken off for each invalid step (0: none; success is 1)."),
    pickAndPlace: weight("pick and place"),
    lookAtInLight: weight("look at in light"),
    cleanAndPlace: weight("clean and place"),
    heatAndPlace: weight("heat and place"),
    coolAndPlace: weight("cool and place"),
    pickTwoAndPlace: weight("pick two and place"),
  })
  .refine(
    (o) => o.pickAndPlace + o.lookAtInLight + o.cleanAndPlace + o.heatAndPlace + o.coolAndPlace + o.pickTwoAndPlace > 0,
    { message: "at least one goal kind weight must be positive", path: ["pickAndPlace"] },
  );
export type HouseholdOptions = z.output<typeof householdOptionsSchema>;

export const HOUSEHOLD_DATA_SOURCE = "synthetic/household";

export interface HouseholdTask extends Task {
  readonly options: HouseholdOptions;
  readonly items: Record<Split, HouseholdItem[]>;
}

export function kindWeights(o: HouseholdOptions): KindWeights {
  return {
    pick_and_place: o.pickAndPlace,
    look_at_in_light: o.lookAtInLight,
    clean_and_place: o.cleanAndPlace,
    heat_and_place: o.heatAndPlace,
    cool_and_place: o.coolAndPlace,
    pick_two_and_place: o.pickTwoAndPlace,
  };
}

export function householdRow(
  item: HouseholdItem,
  split: Split,
  index: number,
  maxSteps: number,
  invalidPenalty = 0,
): TaskRow {
  const household: HouseholdEpisode = {
    world: item.world,
    goal: item.goal,
    maxSteps,
    ...(invalidPenalty > 0 ? { invalidPenalty } : {}),
  };
  const [system, user] = openingPrompt(household);
  return makeRow({
    dataSource: HOUSEHOLD_DATA_SOURCE,
    ability: "household",
    system: system.content,
    question: user.content,
    answer: item.task,
    split,
    index,
    tools: [envStepTool.name],
    extra: { kind: item.kind, task: item.task, layout: item.layout, unseen: split === "test", household },
  });
}

export function createHouseholdTask(options: Record<string, unknown> = {}): HouseholdTask {
  const o = parseTaskOptions("household", householdOptionsSchema, options);
  const items = generateHouseholdTasks({
    seed: o.seed,
    sizes: { train: o.train, val: o.val, test: o.test },
    layouts: o.layouts,
    unseenLayouts: o.unseenLayouts,
    weights: kindWeights(o),
    maxSteps: o.maxSteps,
  });
  const rows = (split: Split): TaskRow[] =>
    items[split].map((it, i) => householdRow(it, split, i, o.maxSteps, o.invalidPenalty));
  const demonstrations = (rs: TaskRow[], opts: { seed: number; quality: number }): ChatMessage[][] =>
    rs.flatMap((row, i) =>
      demonstrateRow(row, opts.quality, demoMode(opts.seed, i, opts.quality, HOUSEHOLD_MISTAKES).rng),
    );
  const tools = [toolSchema(envStepTool)];
  return {
    name: "household",
    options: o,
    items,
    tools,
    rows,
    // The env reads everything from the row on reset.
    makeEnv: () => new HouseholdEnv(),
    score(t, _row, tokenizer) {
      const last = t.steps[t.steps.length - 1];
      const success = t.endReason === "done" && last?.info.success === true ? 1 : 0;
      const texts = actionTexts(t, tokenizer);
      const formatOk = texts.length > 0 && texts.every((x) => readCommand(x).ok) ? 1 : 0;
      return { reward: t.reward, em: success, f1: success, formatOk };
    },
    demonstrations,
    *corpus() {
      yield HOUSEHOLD_SYSTEM_PROMPT;
      for (const t of tools) yield templateJson(t); // as the chat template lists it
      for (const split of GENERATION_ORDER) for (const row of rows(split)) yield row.prompt[1].content;
      // Each step's observation and the expert's turn (the prompts' other lines are in the rows already).
      for (const demo of demonstrations(rows("train"), { seed: o.seed, quality: 1 })) {
        yield demo[1].content.split("\n").find((l) => l.startsWith("Observation: ")) ?? "";
        yield demo[2].content;
      }
    },
  };
}
