/** The RL math: datums, advantage estimators, rewards, KL, policy losses, aggregation, filters, off-policy masks, whitening, distillation. */
export * from "./advantages/index.js";
export * from "./datums.js";
export * from "./episode-rewards.js";
export * from "./process-rewards.js";
export * from "./kl.js";
export * from "./distill.js";
export * from "./value-loss.js";
export * from "./policy-loss.js";
export * from "./aggregation.js";
export * from "./loss-metrics.js";
export * from "./filters.js";
export * from "./off-policy-mask.js";
export * from "./whiten.js";
export * from "./groups.js";
