/** The engine factory a recipe's `engine` section names; the one place the CLI picks an engine kind. */
import type { EngineFactory } from "../engine/factory.js";
import { localEngineOptions, localEngines } from "../engine/local/factory.js";
import { tinkerEngines } from "../engine/remote/factory.js";
import type { TrainConfig } from "../train/config.js";
import { settings } from "../util/settings.js";

type Section = TrainConfig["engine"];

const KINDS: Record<Section["kind"], (section: Section, log?: (line: string) => void) => EngineFactory> = {
  local: (section) => localEngines(localEngineOptions(section)),
  tinker: (section, log) =>
    tinkerEngines(section.tinker!, { defaultUrl: settings().tinkerBaseUrl, apiKey: settings().tinkerApiKey, log }),
};

/** `log` receives the engine's progress lines (a remote engine's retries). */
export function enginesFor(section: Section, log?: (line: string) => void): EngineFactory {
  return KINDS[section.kind](section, log);
}
