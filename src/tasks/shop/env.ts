/**
 * The shop environment (an Env over task rows): one tool, env_step(command).
 * Every observation is the whole next prompt rebuilt from the state
 * (`{ prompt }`), so each step is its own training row. Only the first tool
 * call of an action counts; no call, an unreadable call, another tool, or a
 * command that is malformed or not available leaves the state as it was and
 * the next prompt says what was wrong. Reward: 0 per step, the purchase score
 * on Buy Now (then done). At 15 steps without a purchase the episode ends
 * with score 0.
 *
 * info of each step: state (the anchor state the action was taken in:
 * instruction, page, available actions), command, valid, error, wellFormed
 * (one readable env_step call with a string command), and when done: score,
 * success, bought (product id, chosen options, the score's parts).
 */
import { hermesFormat } from "../../agent/formats/hermes.js";
import type { Action, Env, Observation, StepResult } from "../../agent/env.js";
import type { ToolSchema } from "../../model/chat-template.js";
import type { TaskRow } from "../types.js";
import type { Catalogue } from "./catalogue.js";
import type { Goal } from "./instructions.js";
import { cutText, renderPrompt, renderState, SHOP_TOOLS, type HistoryEntry } from "./prompt.js";
import type { ShopSearch } from "./search.js";
import { ShopSim } from "./simulator.js";

export const MAX_STEPS = 15;

/** The goal a row carries (reward_model.ground_truth is its JSON). */
export function rowGoal(row: TaskRow): Goal {
  const g = JSON.parse(row.reward_model.ground_truth) as Goal;
  if (typeof g?.instruction !== "string" || typeof g.budget !== "number")
    throw new Error("shop: the row's ground_truth is not a shop goal");
  return g;
}

/** The command of an action's first tool call, or why there is none. */
export function actionCommand(text: string): { command: string } | { error: string } {
  const { calls } = hermesFormat.parse(text);
  if (calls.length === 0)
    return {
      error:
        'no tool call: call env_step, e.g. <tool_call>{"name": "env_step", "arguments": {"command": "..."}}</tool_call>',
    };
  const c = calls[0];
  if (!c.ok) return { error: `the tool call could not be read (${c.error})` };
  if (c.name !== "env_step") return { error: `unknown tool '${c.name.slice(0, 40)}': the only tool is env_step` };
  const command = c.arguments.command;
  if (typeof command !== "string" || command.trim() === "")
    return { error: 'env_step needs "command", a non-empty string' };
  return { command: command.trim() };
}

export class ShopEnv implements Env<TaskRow> {
  readonly tools: ToolSchema[] = SHOP_TOOLS;
  private sim?: ShopSim;
  private history: HistoryEntry[] = [];
  private note?: string;
  private steps = 0;
  private done = false;

  constructor(
    private readonly catalogue: Catalogue,
    private readonly search: ShopSearch,
  ) {}

  reset(row: TaskRow): Observation {
    this.sim = new ShopSim(this.catalogue, this.search, rowGoal(row));
    this.history = [];
    this.note = undefined;
    this.steps = 0;
    this.done = false;
    return { prompt: this.prompt() };
  }

  /** The anchor state: instruction, current page, available actions. */
  state(): string {
    const sim = this.requireSim();
    return renderState(sim.goal.instruction, sim.render(), sim.actions());
  }

  prompt() {
    const sim = this.requireSim();
    return renderPrompt(sim.goal.instruction, sim.render(), sim.actions(), this.history, this.note);
  }

  step(action: Action): StepResult {
    const sim = this.requireSim();
    if (this.done) throw new Error("shop: step after the episode ended");
    const state = this.state();
    const shown = `${this.note ? `${this.note}\n` : ""}${sim.render()}`;
    this.steps++;
    const parsed = actionCommand(action.text);
    const result = "error" in parsed ? { ok: false as const, error: parsed.error } : sim.act(parsed.command);
    const command = "command" in parsed ? parsed.command : undefined;
    this.history.push({
      observation: shown,
      action: command === undefined ? "(no valid env_step call)" : cutText(command, 100),
    });
    this.note = result.ok ? undefined : `Invalid action: ${result.error}. Nothing changed.`;
    const info: Record<string, unknown> = {
      state,
      command: command ?? null,
      valid: result.ok,
      wellFormed: command !== undefined,
      ...(result.ok ? {} : { error: result.error }),
    };
    const bought = result.ok ? result.bought : undefined;
    if (bought || this.steps >= MAX_STEPS) {
      this.done = true;
      const score = bought?.score ?? 0;
      Object.assign(info, { score, success: bought?.success ?? false, bought: bought ?? null });
      return { observation: { prompt: this.prompt() }, reward: score, done: true, info };
    }
    return { observation: { prompt: this.prompt() }, reward: 0, done: false, info };
  }

  private requireSim(): ShopSim {
    if (!this.sim) throw new Error("shop: step before reset");
    return this.sim;
  }
}
