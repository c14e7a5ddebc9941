/** The engine factory a recipe's `engine` section names; the one place the CLI picks an engine kind. */
import type { EngineFactory } from "../engine/factory.js";
import { localEngineOptions, localEngines } from "../engine/local/factory.js";
import type { TrainConfig } from "../train/config.js";

const KINDS: Record<TrainConfig["engine"]["kind"], (section: TrainConfig["engine"]) => EngineFactory> = {
  local: (section) => localEngines(localEngineOptions(section)),
};

export function enginesFor(section: TrainConfig["engine"]): EngineFactory {
  return KINDS[section.kind](section);
}
