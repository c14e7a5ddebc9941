export * from "./util/errors.js";
export type * from "./engine/types.js";
export { LocalEngine, type LocalEngineOptions } from "./engine/local/local-engine.js";
export type { EngineFactory, PolicyEngine, OwnedCritic } from "./engine/factory.js";
export { localEngines, localEngineOptions } from "./engine/local/factory.js";
export { enginesFor } from "./engine/engines-for.js";
export { LocalCritic } from "./engine/local/critic.js";
export { Tokenizer, IncrementalDecoder } from "./model/tokenizer.js";
export {
  renderChatTemplate,
  DEFAULT_CHAT_TEMPLATE,
  type ChatMessage,
  type ToolSchema,
  type ToolCall,
} from "./model/chat-template.js";
export { renderChat, encodeChat } from "./model/chat.js";
export { parseModelConfig, PRESETS, type ModelConfig, type PresetName } from "./model/config.js";
export { initModel } from "./model/init-model.js";
export { loadModelDir, writeModelDir, readModelConfig } from "./model/model-dir.js";
export { loadModelWeights, saveModelWeights, readSafetensorsFile, writeSafetensorsFile } from "./model/safetensors.js";
export {
  loadModelWeightsRaw,
  toFloat32,
  fromFloat32,
  type RawTensor,
  type HostTensor,
  type DType,
} from "./model/safetensors.js";
export {
  readPeftAdapter,
  writePeftAdapter,
  mergeAdapters,
  initAdapters,
  loraScale,
  loraModules,
  targetsFromTinker,
  tinkerFromTargets,
  type LoraSpec,
  type LoraTarget,
  type LoraAdapter,
  type LoraAdapters,
} from "./model/peft.js";
export { trainByteLevelBpe } from "./model/bpe-trainer.js";
export * from "./agent/index.js";
export * from "./rl/index.js";
export * from "./tasks/index.js";
export * from "./rewards/index.js";
export * from "./data/index.js";
export * from "./train/index.js";
export * from "./tools/index.js";
export { startServer, type ServeOptions, type RunningServer } from "./serve/server.js";
export * from "./gateway/index.js";
export { startDashboard, type Dashboard, type DashboardOptions } from "./dashboard/index.js";
