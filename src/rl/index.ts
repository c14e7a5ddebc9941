/** The RL math: advantage estimators, process rewards, KL, filters, whitening. */
export * from "./advantages/index.js";
export * from "./process-rewards.js";
export * from "./kl.js";
export * from "./filters.js";
export * from "./whiten.js";
export * from "./groups.js";
