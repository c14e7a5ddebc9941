/**
 * An env with its own state, written against the Env interface directly: the
 * model guesses a secret number and hears "Higher." or "Lower." back.
 */
import type { Action, AgentMessage, Env, Observation, StepResult } from "agent-r1/agent";

export interface GuessRow {
  secret: number;
  max: number;
}

export class GuessNumberEnv implements Env<GuessRow> {
  private secret = 0;
  private guesses = 0;

  reset(row: GuessRow): Observation {
    this.secret = row.secret;
    this.guesses = 0;
    return {
      messages: [
        { role: "system", content: "You play a guessing game. Reply with <guess>n</guess> and nothing else." },
        { role: "user", content: `I picked a whole number from 1 to ${row.max}. Your guess?` },
      ],
    };
  }

  step(action: Action): StepResult {
    const m = /<guess>\s*(-?\d+)\s*<\/guess>/.exec(action.text);
    const say = (content: string): { messages: AgentMessage[] } => ({ messages: [{ role: "user", content }] });
    if (!m)
      return { observation: say("Reply with <guess>n</guess>."), reward: -0.1, done: false, info: { valid: false } };
    const guess = Number(m[1]);
    this.guesses++;
    if (guess === this.secret)
      return { observation: { messages: [] }, reward: 1, done: true, info: { valid: true, guesses: this.guesses } };
    return {
      observation: say(guess < this.secret ? "Higher." : "Lower."),
      reward: 0,
      done: false,
      info: { valid: true, guesses: this.guesses },
    };
  }
}
