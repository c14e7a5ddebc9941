/**
 * Simulated latencies for the benchmarks: an engine factory whose policies wait before every sample
 * call (as a far or busy inference server would), and a task whose env waits before every step (as
 * a slow tool or environment would), everything else unchanged. Both stand for parts of a rollout
 * that do not use this machine's cores, which is what asynchronous training can overlap with the
 * learner's work.
 */
import type { EngineFactory, PolicyEngine } from "../src/engine/factory.js";
import type { SampleResult, SamplingParams } from "../src/engine/types.js";
import type { Task } from "../src/tasks/types.js";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** `policy`, with every sample call `ms` later. */
function delayedSampling(policy: PolicyEngine, ms: number): PolicyEngine {
  return {
    get tokenizer() {
      return policy.tokenizer;
    },
    get config() {
      return policy.config;
    },
    sample: async (prompt: number[], params?: SamplingParams): Promise<SampleResult> => {
      await sleep(ms);
      return policy.sample(prompt, params);
    },
    computeLogprobs: (s, o) => policy.computeLogprobs(s, o),
    forwardBackward: (d, l) => policy.forwardBackward(d, l),
    optimStep: (p) => policy.optimStep(p),
    save: (dir) => policy.save(dir),
    load: (dir) => policy.load(dir),
    describe: () => `${policy.describe?.() ?? "policy"}; sampling ${ms} ms later`,
    prefixHitRate: async () => (await policy.prefixHitRate?.()) ?? 0,
    dispose: () => policy.dispose(),
  };
}

/** `engines`, whose policies sample `ms` later per call (0: unchanged). */
export function slowSampling(engines: EngineFactory, ms: number): EngineFactory {
  if (ms <= 0) return engines;
  return { ...engines, policy: async (dir) => delayedSampling(await engines.policy(dir), ms) };
}

/** `task`, whose envs answer each step `ms` later (0: unchanged). */
export function slowEnvSteps(task: Task, ms: number): Task {
  if (ms <= 0) return task;
  return {
    ...task,
    makeEnv: (row) => {
      const env = task.makeEnv(row);
      const step = env.step.bind(env);
      env.step = async (action) => {
        await sleep(ms);
        return step(action);
      };
      return env;
    },
  };
}
