/**
 * Reward functions: pure ones (string in, number out), and a judge reward (an LLM at an
 * OpenAI-compatible endpoint scoring trajectories against a rubric).
 */
export { normalizeAnswer, exactMatch, f1Score, type F1Result } from "./qa.js";
export { extractNumber, numbersMatch, numberAnswerCorrect } from "./math.js";
export { ANSWER_PATTERN, extractAnswer, isToolTurn, isAnswerTurn, formatScore, rewardWithFormat } from "./format.js";
export { judgeReward, type JudgeReward, type JudgeGroupResult, type JudgeStats, type JudgeQuestion } from "./judge.js";
export { judgeConfigSchema, parseJudgeConfig, type JudgeConfig, type JudgeOptions } from "./judge-config.js";
export { judgeMessages, parseJudgeAnswer, type JudgeMode, type ParsedScores } from "./judge-prompt.js";
export { renderTrajectory, renderTask, truncateMiddle } from "./render-trajectory.js";
export { judgeTrajectories, type JudgedTrajectories } from "./judge-trajectories.js";
export { combineJudgeReward, withJudgeScore } from "./combine-judge.js";
