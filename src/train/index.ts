/** Training: configuration, the loop, evaluation, checkpoints. */
export { configSchema, ESTIMATORS, type TrainConfig } from "./config.js";
export { loadConfig, parseConfig, applyOverride } from "./load-config.js";
export { train, type TrainRunOptions, type TrainRunResult } from "./run.js";
export { Trainer, type TrainOptions, type TrainState, type IterationMetrics } from "./trainer.js";
export { playRows, summarizeEpisodes, type EpisodeSummary, type PlayOptions } from "./evaluate.js";
export { learningRate } from "./lr-schedule.js";
export { writeCheckpoint, latestCheckpoint, verifyCheckpoint } from "./checkpoint.js";
export { prepareBatch } from "./prepare-batch.js";
export { updatePolicy, updateCritic, lossSpec, withKlCoef, type PolicyUpdate } from "./update.js";
