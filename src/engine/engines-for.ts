/**
 * The engine factory a recipe's `engine` section names: the one place an engine kind is picked
 * (`local`: in this process; `tinker`: a Tinker-protocol server), with an `engine.sampler` wrapped
 * around the local policy. The CLI and the library's `train` both build their engines here.
 */
import { rolloutSampler } from "./remote/sampler-client.js";
import { SplitEngine } from "./remote/split-engine.js";
import type { EngineFactory } from "./factory.js";
import { localEngineOptions, localEngines } from "./local/factory.js";
import { tinkerEngines } from "./remote/factory.js";
import type { TrainConfig } from "../train/config.js";
import { settings } from "../util/settings.js";
import { makeTempDir } from "../util/temp-dirs.js";

type Section = TrainConfig["engine"];

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

/** `log` receives the engine's progress lines (a remote engine's retries). */
export function enginesFor(section: Section, log?: (line: string) => void): EngineFactory {
  const factory = KINDS[section.kind](section, log);
  const s = section.sampler;
  if (!s) return factory;
  // Rollouts on an inference server, training here: the policy is wrapped, the rest unchanged.
  return {
    ...factory,
    async policy(dir) {
      const sampler = rolloutSampler({ kind: s.kind, url: s.url, model: s.model, apiKey: settings().samplerApiKey });
      const learner = await factory.policy(dir);
      // Without a weightsDir, a temporary one: removed by the engine's dispose, or at exit, or on SIGINT/SIGTERM.
      if (s.weightsDir) return new SplitEngine(learner, sampler, s.weightsDir);
      return new SplitEngine(learner, sampler, makeTempDir("agent-r1-sampler-"), true);
    },
  };
}
