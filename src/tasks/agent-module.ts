/**
 * A task module that exports `agent`: the agent the user already has, trained as it is. The module exports
 *   agent: (row, { baseURL, apiKey, model, signal }) => Promise<reward | { reward, metrics }>
 * and its rows (./user-module.ts). Each episode gets its own baseURL and apiKey (a key opens only
 * its episode). Episodes are played through the recording gateway (src/gateway/agent-rollout.ts)
 * under the recipe's rollout limits (maxTurns, maxTokensPerTurn, maxTotalTokens); an agent's
 * `metrics.em` and `metrics.f1`, when it returns them, are logged as exact match and F1.
 */
import type { Trajectory } from "../agent/trajectory.js";
import { agentRollout, type Agent } from "../gateway/agent-rollout.js";
import { InputError } from "../util/errors.js";
import type { Split, Task, TaskRow } from "./types.js";
import type { LoadedModule } from "./user-module.js";

/** The metrics the agent returned, kept on the trajectory's last step. */
const agentMetricsOf = (t: Trajectory) =>
  ((t.steps[t.steps.length - 1]?.info as { agent?: Record<string, number> }).agent ?? {}) as Record<string, number>;

export function agentTask(
  { mod, where }: LoadedModule,
  rows: Record<Split, TaskRow[]>,
  name: string,
  options: Record<string, unknown> = {},
): Task {
  if (typeof mod.agent !== "function") throw new InputError(`${where}: export agent, a function (row, ctx) => reward`);
  const agent = mod.agent as Agent<TaskRow>;
  const timeoutMs = typeof options.timeoutMs === "number" ? options.timeoutMs : undefined;
  /** What the run has already said about the agent's sampling requests (once per run, not per iteration). */
  const said = new Set<string>();
  return {
    name,
    rows: (split) => rows[split],
    makeEnv() {
      throw new InputError(`${where}: an agent task plays through the gateway and has no env`);
    },
    async play(engine, list, o) {
      const res = await agentRollout(engine, agent, list, {
        n: o.n,
        seed: o.seed,
        temperature: o.temperature,
        topP: o.topP,
        agentSampling: o.agentSampling,
        said,
        maxTurns: o.maxTurns,
        maxTokensPerTurn: o.maxTokensPerTurn,
        maxTotalTokens: o.maxTotalTokens,
        ...(timeoutMs !== undefined ? { timeoutMs } : {}),
        log: o.log,
      });
      for (const t of res.trajectories) {
        const last = t.steps[t.steps.length - 1];
        last.info = { ...last.info, agent: res.agentMetrics.get(t.id) ?? {} };
      }
      return res;
    },
    score(t) {
      const m = agentMetricsOf(t);
      return { reward: t.reward, em: m.em ?? 0, f1: m.f1 ?? 0, formatOk: 1 };
    },
    demonstrations() {
      throw new InputError(`${where}: an agent task has no scripted demonstrations (pretrain needs a built-in task)`);
    },
    corpus: () => [],
  };
}
