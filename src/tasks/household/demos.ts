/**
 * Demonstrations for warm start. Every step has its own prompt, so a
 * demonstration is one conversation per step: [system, user (the prompt the
 * env rebuilt for that step), assistant (a short thought + one env_step
 * call)]. The episode is played through the real env, so each prompt is
 * exactly what a rollout would show.
 *
 * The expert is the one that knows only what the agent has seen (expert.ts):
 * it searches for what it needs, as a model reading the prompt must.
 *
 * With quality < 1, each step is a mistake at rate 1 - quality (drawn per
 * step): "invalid" writes a command that is not admissible (the env refuses
 * it and says why); "wasteful" takes an admissible step that does not help
 * (going somewhere else, looking, checking the inventory, examining). The
 * expert then plans again from wherever that left it; an episode may run out
 * of steps.
 */
import type { Action } from "../../agent/env.js";
import type { ChatMessage } from "../../model/chat-template.js";
import type { Rng } from "../../util/rng.js";
import { toolTurn } from "../common/turns.js";
import type { TaskRow } from "../types.js";
import { admissibleCommands } from "./admissible.js";
import { HouseholdEnv, envStepTool } from "./env.js";
import { expertStep, type ExpertStep } from "./expert.js";
import type { House } from "./simulator.js";

export const HOUSEHOLD_MISTAKES = ["invalid", "wasteful"] as const;

const pick = <T>(rng: Rng, xs: readonly T[]): T => xs[rng.int(xs.length)];

/** A command the state does not admit, with the thought that led to it. */
function invalidStep(h: House, rng: Rng): ExpertStep {
  const admissible = new Set(admissibleCommands(h));
  const objects = h.objects();
  for (let i = 0; i < 20; i++) {
    const r = pick(rng, h.receptacles),
      o = pick(rng, objects);
    const candidates: ExpertStep[] = [
      { command: `take ${o} from ${r}`, thought: `I take the ${o} from the ${r}.` },
      { command: `open ${r}`, thought: `I open the ${r}.` },
      { command: `move ${o} to ${r}`, thought: `I put the ${o} in the ${r}.` },
      { command: `heat ${o} with ${r}`, thought: `I heat the ${o}.` },
    ];
    const c = pick(rng, candidates);
    if (!admissible.has(c.command)) return c;
  }
  return { command: "search the house", thought: "I search the house." };
}

/** An admissible step that does not help. */
function wastefulStep(h: House, expert: ExpertStep, rng: Rng): ExpertStep {
  const options = admissibleCommands(h).filter(
    (c) => c !== expert.command && /^(go to|examine|look$|inventory$)/.test(c),
  );
  const command = pick(rng, options);
  const thought = command.startsWith("go to")
    ? `Let me check the ${command.slice(6)}.`
    : command.startsWith("examine")
      ? `Let me examine the ${command.slice(8)}.`
      : command === "look"
        ? "Let me look around."
        : "Let me check what I carry.";
  return { command, thought };
}

function actionText(text: string, turn: number): Action {
  return { text, tokens: [], logprobs: [], stopReason: "stop", turn };
}

/** One row's demonstration: one [system, user, assistant] conversation per step. */
export function demonstrateRow(row: TaskRow, quality: number, rng: Rng): ChatMessage[][] {
  const env = new HouseholdEnv();
  let prompt = env.reset(row).prompt;
  const out: ChatMessage[][] = [];
  const seen = new Set<string>();
  for (let turn = 0; ; turn++) {
    const h = env.state;
    if (h.at !== null && h.accessible(h.at)) seen.add(h.at);
    const expert = expertStep(h, env.goalSpec, seen);
    if (!expert) throw new Error("internal: the goal holds but the episode did not end");
    const mistake = rng.next() >= quality;
    const step = !mistake
      ? expert
      : rng.next() < 0.5
        ? invalidStep(env.state, rng)
        : wastefulStep(env.state, expert, rng);
    const turnMessage = toolTurn(step.thought, envStepTool.name, { command: step.command });
    out.push([...(prompt as ChatMessage[]), turnMessage]);
    const r = env.step(actionText(turnMessage.content, turn));
    if (r.done) return out;
    prompt = (r.observation as { prompt: ChatMessage[] }).prompt;
  }
}
