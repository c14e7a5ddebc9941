/** The calculator task (GSM8K analogue) and its safe `calculator` tool. */
export {
  createCalcTask,
  calcOptionsSchema,
  calcJudge,
  generateCalcProblems,
  CALC_DATA_SOURCE,
  type CalcOptions,
} from "./task.js";
export { calculatorTool, calculate } from "./calculator-tool.js";
export { evaluateArithmetic, formatNumber, MAX_EXPRESSION_CHARS, MAX_DEPTH, MAX_DIGITS } from "./calculator.js";
export { CALC_TEMPLATES, CALC_TEMPLATE_IDS, makeProblem, type CalcProblem } from "./problems.js";
export { calcExpertTurns, CALC_MISTAKES, type CalcMode } from "./expert.js";
export { CALC_SYSTEM_PROMPT } from "./prompt.js";
