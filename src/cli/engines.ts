/** The engine factory a recipe's `engine` section names; the one place the CLI picks an engine kind. */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { rolloutSampler } from "../engine/remote/sampler-client.js";
import { SplitEngine } from "../engine/remote/split-engine.js";
import type { EngineFactory, PolicyEngine } from "../engine/factory.js";
import type { LocalEngineOptions } from "../engine/local/local-engine.js";
import { readRemoteState, REMOTE_FILE, TinkerEngine } from "../engine/remote/tinker-engine.js";
import { localEngineOptions, localEngines } from "../engine/local/factory.js";
import { tinkerEngines } from "../engine/remote/factory.js";
import type { TrainConfig } from "../train/config.js";
import { settings } from "../util/settings.js";
import { makeTempDir } from "../util/temp-dirs.js";

type Section = TrainConfig["engine"];

const KINDS: Record<Section["kind"], (section: Section, log?: (line: string) => void) => EngineFactory> = {
  local: (section) => localEngines(localEngineOptions(section)),
  tinker: (section, log) =>
    tinkerEngines(section.tinker!, { defaultUrl: settings().tinkerBaseUrl, apiKey: settings().tinkerApiKey, log }),
};

/**
 * A model directory as an engine, for the commands that take --model: a local Hugging Face
 * directory, or a checkpoint of a remote run (its remote.json names the server, and the run's
 * state is loaded there; TINKER_BASE_URL and TINKER_API_KEY override or complete it).
 */
export async function openModel(dir: string, local: LocalEngineOptions = {}): Promise<PolicyEngine> {
  if (existsSync(join(dir, REMOTE_FILE))) {
    const st = readRemoteState(dir);
    return TinkerEngine.open({
      url: settings().tinkerBaseUrl ?? st.url,
      apiKey: settings().tinkerApiKey,
      baseModel: st.baseModel,
      ...(st.lora ? { lora: st.lora } : {}),
      sdkVersion: st.sdkVersion ?? "0.25.0",
      tokenizerDir: dir,
      resumeFrom: dir,
    });
  }
  const { LocalEngine } = await import("../engine/local/local-engine.js");
  return LocalEngine.load(dir, local);
}

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
