/**
 * The household env: one tool, `env_step(command)`; every observation is the
 * whole next prompt rebuilt from the state ({ prompt: [system, user] }), so
 * each step is its own segment and its own training datum.
 *
 * A step reads the first tool call of the action (Hermes format). A call that
 * is missing, malformed, names another tool, or holds a command that is not
 * admissible changes nothing: the next observation says what was wrong and
 * why, and the history marks the step invalid. Reward: 1 on the step that
 * completes the goal (done), 0 on every other step, or −invalidPenalty (the
 * row's, 0 unless set) on an invalid one. The episode also ends
 * (done, reward 0) after `maxSteps` steps (20 by default, carried in the row):
 * the limit is the env's own, so the loop's maxTurns must be at least that.
 *
 * info per step: `step` (0-based index of the action), `state` (the anchor
 * state the action was taken in, see prompt.ts), `command` (as read, when a
 * call was read), `valid`, `error` (why not), `success`.
 */
import { z } from "zod";
import type { Action, Env, StepResult } from "../../agent/env.js";
import type { AgentMessage } from "../../agent/chat-setup.js";
import { hermesFormat } from "../../agent/formats/hermes.js";
import { defineTool, toolSchema } from "../../agent/tool.js";
import type { ToolSchema } from "../../model/chat-template.js";
import { InputError } from "../../util/errors.js";
import type { TaskRow } from "../types.js";
import { admissibleCommands, whyNotAdmissible } from "./admissible.js";
import { goalMet, goalText, GOAL_KINDS, type Goal } from "./goals.js";
import { HOUSEHOLD_SYSTEM_PROMPT, stateText, userPrompt, type HistoryEntry } from "./prompt.js";
import { House, normalizeCommand } from "./simulator.js";
import type { HouseWorld } from "./world.js";

export const DEFAULT_MAX_STEPS = 20;
export const MAX_COMMAND_CHARS = 200;

// The schema the prompt lists is kept short (a small model reads it every step); the length is checked on reading.
const envStepArgs = z.object({ command: z.string() });

export const envStepTool = defineTool({
  name: "env_step",
  description: "Runs one admissible command.",
  inputSchema: envStepArgs,
  execute: () => {
    throw new Error("env_step runs inside the household env, not as a tool of its own");
  },
});

/** What a row carries for the env: the starting world, the goal, the step limit. */
export interface HouseholdEpisode {
  world: HouseWorld;
  goal: Goal;
  maxSteps: number;
  /** Reward of an invalid step, negated (absent: 0). */
  invalidPenalty?: number;
}

export function episodeOf(row: TaskRow): HouseholdEpisode {
  const e = row?.extra_info?.household as Partial<HouseholdEpisode> | undefined;
  if (
    typeof e !== "object" ||
    e === null ||
    !Array.isArray(e.world?.rooms) ||
    !Array.isArray(e.world?.objects) ||
    !Array.isArray(e.world?.lamps) ||
    !GOAL_KINDS.includes(e.goal?.kind as Goal["kind"]) ||
    !(Number.isInteger(e.maxSteps) && e.maxSteps! > 0) ||
    !(e.invalidPenalty === undefined || (e.invalidPenalty >= 0 && e.invalidPenalty <= 1))
  )
    throw new InputError(
      "household: the row has no extra_info.household { world, goal, maxSteps, invalidPenalty? }",
      "use rows from the household task's rows(split)",
    );
  return e as HouseholdEpisode;
}

export type ReadCommand = { ok: true; command: string } | { ok: false; error: string; label: string };

/** The command of an action's first tool call, or what is wrong with it. */
export function readCommand(text: string): ReadCommand {
  const { calls } = hermesFormat.parse(text);
  const call = calls[0];
  if (!call)
    return {
      ok: false,
      label: "no tool call",
      error: `there was no tool call; call env_step with one admissible command. ${hermesFormat.usage}`,
    };
  if (!call.ok)
    return { ok: false, label: "malformed tool call", error: `the tool call could not be read: ${call.error}` };
  if (call.name !== envStepTool.name)
    return {
      ok: false,
      label: "call to an unknown tool",
      error: `there is no tool ${JSON.stringify(call.name.slice(0, 40))}; the only tool is env_step`,
    };
  const args = envStepArgs.safeParse(call.arguments);
  const command = args.success ? args.data.command : undefined;
  const extra = Object.keys(call.arguments).filter((k) => k !== "command");
  if (command === undefined || command.trim() === "" || command.length > MAX_COMMAND_CHARS || extra.length > 0)
    return {
      ok: false,
      label: "env_step with bad arguments",
      error: `env_step takes {"command": <one admissible command>} (a non-empty string of at most ${MAX_COMMAND_CHARS} characters, nothing else)`,
    };
  return { ok: true, command: normalizeCommand(command) };
}

/** The first prompt of an episode: what reset returns, [system, user]. */
export function openingPrompt(e: HouseholdEpisode): AgentMessage[] {
  return new HouseholdEnv().start(e).prompt;
}

export class HouseholdEnv implements Env<TaskRow> {
  readonly tools: ToolSchema[] = [toolSchema(envStepTool)];
  private house?: House;
  private goal?: Goal;
  private task = "";
  private maxSteps = DEFAULT_MAX_STEPS;
  private invalidPenalty = 0;
  private readonly history: HistoryEntry[] = [];
  /** The last observation of the world (what the prompt shows when the last step was valid). */
  private seen = "";
  /** What the prompt shows as the observation. */
  private shown = "";
  private over = false;

  reset(row: TaskRow): { prompt: AgentMessage[] } {
    return this.start(episodeOf(row));
  }

  /** Starts an episode (what reset does with the row's episode). */
  start(e: HouseholdEpisode): { prompt: AgentMessage[] } {
    this.house = new House(e.world);
    this.goal = e.goal;
    this.task = goalText(e.goal);
    this.maxSteps = e.maxSteps;
    this.invalidPenalty = e.invalidPenalty ?? 0;
    this.history.length = 0;
    this.seen = this.shown = this.house.overview();
    this.over = false;
    return { prompt: this.prompt() };
  }

  /** The simulator (read it, do not change it): the expert plans from it. */
  get state(): House {
    if (!this.house) throw new Error("household env: reset first");
    return this.house;
  }

  get goalSpec(): Goal {
    if (!this.goal) throw new Error("household env: reset first");
    return this.goal;
  }

  admissible(): string[] {
    return admissibleCommands(this.state);
  }

  /** The anchor state text of the current state. */
  stateText(): string {
    return stateText(this.task, this.seen, this.admissible());
  }

  prompt(): AgentMessage[] {
    return [
      { role: "system", content: HOUSEHOLD_SYSTEM_PROMPT },
      {
        role: "user",
        content: userPrompt({
          task: this.task,
          observation: this.shown,
          history: this.history,
          admissible: this.admissible(),
        }),
      },
    ];
  }

  step(action: Action): StepResult {
    const house = this.state;
    if (this.over) throw new Error("household env: the episode is over; reset first");
    const step = this.history.length;
    const state = this.stateText();
    const read = readCommand(action.text);
    let valid = false,
      error: string | undefined,
      command: string | undefined;
    if (!read.ok) {
      error = read.error;
      this.history.push({ command: read.label, invalid: true });
      this.shown = `Your last reply was invalid: ${error}. Nothing changed. ${this.seen}`;
    } else {
      command = read.command;
      if (this.admissible().includes(command)) {
        valid = true;
        this.seen = this.shown = house.execute(command);
        this.history.push({ command, invalid: false });
      } else {
        error = whyNotAdmissible(house, command);
        const shown = command.length > 80 ? `${command.slice(0, 80)}...` : command;
        this.history.push({ command: shown, invalid: true });
        this.shown = `"${shown}" is not admissible: ${error}. Nothing changed. ${this.seen}`;
      }
    }
    const success = valid && goalMet(house, this.goalSpec);
    const done = success || this.history.length >= this.maxSteps;
    this.over = done;
    return {
      observation: { prompt: this.prompt() },
      reward: success ? 1 : valid || this.invalidPenalty === 0 ? 0 : -this.invalidPenalty,
      done,
      info: {
        step,
        state,
        ...(command !== undefined ? { command } : {}),
        valid,
        ...(error !== undefined ? { error } : {}),
        success,
      },
    };
  }

  assistantMessage(action: Action): AgentMessage {
    return hermesFormat.assistantMessage(action.text);
  }
}
