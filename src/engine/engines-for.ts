/**
 * The engine factory a recipe's `engine` section names: the one place an engine kind is picked
 * (`local`: in this process; `tinker`: a Tinker-protocol server), with an `engine.sampler` wrapped
 * around the local policy. The CLI and the library's `train` both build their engines here.
 */
import { basename, resolve } from "node:path";
import { rolloutSampler, type RolloutSampler } from "./remote/sampler-client.js";
import { SplitEngine, type WeightsPush } from "./remote/split-engine.js";
import { AdapterPush } from "./remote/adapter-push.js";
import { FullWeightsPush } from "./remote/full-weights-push.js";
import type { EngineFactory, PolicyEngine } from "./factory.js";
import { localEngineOptions, localEngines } from "./local/factory.js";
import { tinkerEngines } from "./remote/factory.js";
import type { TrainConfig } from "../train/config.js";
import { InputError } from "../util/errors.js";
import { settings } from "../util/settings.js";
import { makeTempDir } from "../util/temp-dirs.js";

type Section = TrainConfig["engine"];
type SamplerSection = NonNullable<Section["sampler"]>;

/** Where the engines work. */
export interface EngineSite {
  /** The run directory: a LoRA run's sampler adapters go under it by default, and are named after it. */
  runDir?: string;
}

const KINDS: Record<Section["kind"], (section: Section, log?: (line: string) => void) => EngineFactory> = {
  local: (section) => localEngines(localEngineOptions(section)),
  tinker: (section, log) =>
    tinkerEngines(section.tinker!, {
      defaultUrl: settings().tinkerBaseUrl,
      apiKey: settings().tinkerApiKey,
      credentialCommand: settings().tinkerCredentialCmd,
      log,
    }),
};

/**
 * How a sampler gets the learner's weights: LoRA adapters in a LoRA run (by default under the run
 * directory, which the server must be able to read), else whole model directories (by default in a
 * temporary directory: removed by the engine's dispose, or at exit, or on SIGINT/SIGTERM).
 */
function weightsPush(
  s: SamplerSection,
  lora: boolean,
  learner: PolicyEngine,
  sampler: RolloutSampler,
  site: EngineSite,
  log?: (line: string) => void,
): WeightsPush {
  if (!lora) {
    const save = (dir: string) => learner.save(dir);
    if (s.weightsDir) return new FullWeightsPush(save, sampler, s.weightsDir);
    return new FullWeightsPush(save, sampler, makeTempDir("agent-r1-sampler-"), true);
  }
  if (!learner.saveAdapter) throw new InputError("engine.sampler: this learner cannot write LoRA adapters");
  const save = learner.saveAdapter.bind(learner);
  const run = site.runDir !== undefined ? basename(resolve(site.runDir)) : "agent-r1";
  const common = { save, sampler, run, retries: s.retries, log };
  if (s.weightsDir) return new AdapterPush({ ...common, dir: resolve(s.weightsDir) });
  if (site.runDir !== undefined) return new AdapterPush({ ...common, dir: resolve(site.runDir, "sampler-adapters") });
  return new AdapterPush({ ...common, dir: makeTempDir("agent-r1-sampler-"), ownsDir: true });
}

/** `log` receives the engine's progress lines (a remote engine's retries, a sampler's reloads). */
export function enginesFor(section: Section, log?: (line: string) => void, site: EngineSite = {}): EngineFactory {
  const factory = KINDS[section.kind](section, log);
  const s = section.sampler;
  if (!s) return factory;
  // Rollouts on an inference server, training here: the policy is wrapped, the rest unchanged.
  return {
    ...factory,
    async policy(dir) {
      const sampler = rolloutSampler({ kind: s.kind, url: s.url, model: s.model, apiKey: settings().samplerApiKey });
      const learner = await factory.policy(dir);
      try {
        return new SplitEngine(
          learner,
          sampler,
          weightsPush(s, section.lora !== undefined, learner, sampler, site, log),
        );
      } catch (e) {
        await learner.dispose();
        throw e;
      }
    },
  };
}
