/**
 * Warm start: supervised fine-tuning on a task's scripted demonstrations.
 * A demonstration becomes a Trajectory token for token as a rollout would
 * have recorded it (first context = the prompt messages rendered with the
 * env's tools and the generation prompt; each assistant turn = its tokens +
 * the end-of-turn token; each observation = the chat template's delta), and
 * the datums come from `trajectoryDatums`, so weights are 1 exactly on the
 * assistant's tokens. Training is cross-entropy (token-mean) with AdamW on
 * shuffled mini-batches, linear warm-up then cosine decay.
 */
import { chatSetup, renderMessages, type AgentMessage, type ChatSetup } from "../agent/chat-setup.js";
import { observationDeltaTokens } from "../agent/observation-delta.js";
import { TrajectoryBuilder, type Trajectory } from "../agent/trajectory.js";
import type { Datum, Engine } from "../engine/types.js";
import type { ChatMessage, ToolSchema } from "../model/chat-template.js";
import type { Tokenizer } from "../model/tokenizer.js";
import { trajectoryDatums } from "../rl/datums.js";
import type { Task, TaskRow } from "../tasks/types.js";
import { InputError } from "../util/errors.js";
import { Rng } from "../util/rng.js";
import { learningRate } from "./lr-schedule.js";

/** The trajectory a rollout records when the policy writes exactly the demonstration's assistant turns. */
export function demonstrationTrajectory(
  chat: ChatSetup,
  demo: readonly ChatMessage[],
  tools: ToolSchema[] | undefined,
  id = "demo",
): Trajectory {
  const firstAssistant = demo.findIndex((m) => m.role === "assistant");
  if (firstAssistant <= 0)
    throw new InputError(`demonstration ${id}: needs prompt messages followed by an assistant turn`);
  const history: AgentMessage[] = demo.slice(0, firstAssistant);
  const rec = new TrajectoryBuilder(id, 0, 0);
  let context = chat.tokenizer.encode(renderMessages(chat, history, { tools, addGenerationPrompt: true }));
  for (let i = firstAssistant; i < demo.length;) {
    const turn = demo[i];
    const action = [...chat.tokenizer.encode(turn.content), chat.endOfTurnId];
    let j = i + 1;
    while (j < demo.length && demo[j].role !== "assistant") j++;
    const last = j >= demo.length;
    const messages = demo.slice(i + 1, j);
    if (last && messages.length > 0)
      throw new InputError(
        `demonstration ${id}: ends with a ${messages[messages.length - 1].role} message; it must end with the assistant's answer`,
      );
    const observation = last ? [] : observationDeltaTokens(chat, { history, messages, tools, actionClosed: true });
    rec.add(context, {
      action,
      logprobs: action.map(() => 0),
      stopReason: "stop",
      observation,
      reward: 0,
      done: last,
      toolCalls: [],
      info: {},
      timing: { sampleMs: 0, envMs: 0 },
    });
    history.push(turn, ...messages);
    context = [...context, ...action, ...observation];
    i = j;
  }
  return rec.finish("done");
}

/** SFT datums of a task's demonstrations for `rows` (the env's tools are listed in each prompt). */
export function sftDatums(
  task: Task,
  rows: TaskRow[],
  tokenizer: Tokenizer,
  opts: { seed: number; quality: number },
): Datum[] {
  const chat = chatSetup(tokenizer);
  const demos = task.demonstrations(rows, opts);
  return demos.flatMap((demo, i) => {
    const t = demonstrationTrajectory(chat, demo, task.makeEnv(rows[i]).tools, `demo-${i}`);
    return trajectoryDatums(t).datums;
  });
}

/** Mean cross-entropy (nats per weighted target token) of the datums under the engine's weights. */
export async function meanCrossEntropy(engine: Engine, datums: Datum[]): Promise<number> {
  const lps = await engine.computeLogprobs(datums.map((d) => [...d.tokens, d.targetTokens[d.targetTokens.length - 1]]));
  let sum = 0,
    n = 0;
  datums.forEach((d, k) =>
    d.weights.forEach((w, i) => {
      if (w > 0) [sum, n] = [sum - w * (lps[k][i + 1] ?? 0), n + w];
    }),
  );
  return n > 0 ? sum / n : 0;
}

export interface SftOptions {
  steps: number;
  /** Datums per optimizer step. */
  batchSize: number;
  lr: number;
  warmupSteps?: number;
  weightDecay?: number;
  seed?: number;
  onStep?: (s: { step: number; loss: number; lr: number; gradNorm: number }) => void;
}

/** Optimizer steps over reshuffled passes of the datums; returns the mean loss of the last tenth of the steps. */
export async function trainSft(engine: Engine, datums: Datum[], o: SftOptions): Promise<{ finalLoss: number }> {
  if (datums.length === 0) throw new InputError("sft: no demonstrations to train on");
  if (!(Number.isInteger(o.steps) && o.steps > 0))
    throw new InputError(`sft: steps must be a positive integer, got ${o.steps}`);
  if (!(Number.isInteger(o.batchSize) && o.batchSize > 0))
    throw new InputError(`sft: batch size must be a positive integer, got ${o.batchSize}`);
  const rng = new Rng(o.seed ?? 0, 17);
  const schedule = {
    lr: o.lr,
    schedule: "cosine" as const,
    warmupSteps: o.warmupSteps ?? Math.min(10, Math.floor(o.steps / 10)),
    minLrRatio: 0.1,
  };
  let order: number[] = [],
    at = 0;
  const losses: number[] = [];
  for (let step = 0; step < o.steps; step++) {
    const batch: Datum[] = [];
    while (batch.length < Math.min(o.batchSize, datums.length)) {
      if (at >= order.length) [order, at] = [shuffled(datums.length, rng), 0];
      batch.push(datums[order[at++]]);
    }
    const lr = learningRate(schedule, step, o.steps);
    const fb = await engine.forwardBackward(batch, { type: "cross_entropy", aggregation: "token-mean" });
    const os = await engine.optimStep({ lr, weightDecay: o.weightDecay ?? 0.01, gradClipNorm: 1 });
    losses.push(fb.metrics.loss);
    o.onStep?.({ step: step + 1, loss: fb.metrics.loss, lr, gradNorm: os.gradNorm });
  }
  const tail = losses.slice(-Math.max(1, Math.floor(losses.length / 10)));
  return { finalLoss: tail.reduce((a, b) => a + b, 0) / tail.length };
}

function shuffled(n: number, rng: Rng): number[] {
  const xs = Array.from({ length: n }, (_, i) => i);
  for (let i = n - 1; i > 0; i--) {
    const j = rng.int(i + 1);
    [xs[i], xs[j]] = [xs[j], xs[i]];
  }
  return xs;
}
