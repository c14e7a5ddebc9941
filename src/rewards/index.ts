/** Reward functions: pure, string in, number out. */
export { normalizeAnswer, exactMatch, f1Score, type F1Result } from "./qa.js";
export { extractNumber, numbersMatch, numberAnswerCorrect } from "./math.js";
export { ANSWER_PATTERN, extractAnswer, isToolTurn, isAnswerTurn, formatScore, rewardWithFormat } from "./format.js";
