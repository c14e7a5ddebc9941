/** The multi-hop search task (HotpotQA analogue), its world generator and the BM25 `search` tool. */
export {
  createMultihopTask,
  multihopOptionsSchema,
  qaJudge,
  MULTIHOP_DATA_SOURCE,
  type MultihopOptions,
  type MultihopTask,
} from "./task.js";
export {
  buildSearchIndex,
  searchTool,
  searchText,
  formatResults,
  DEFAULT_TOP_K,
  DEFAULT_MAX_DOC_CHARS,
  type SearchIndex,
} from "./search.js";
export {
  generateWorld,
  worldSizes,
  type World,
  type SplitWorld,
  type Entity,
  type City,
  type River,
  type Person,
  type Company,
} from "./world.js";
export { entityText, worldDocuments } from "./documents.js";
export {
  generateQuestions,
  QUESTION_TEMPLATES,
  QUESTION_TYPES,
  type Question,
  type QuestionType,
} from "./questions.js";
export {
  earliestFounded,
  generateLongQuestions,
  LONG_HORIZON_TYPE,
  longHorizonWorldSizes,
  MIN_HOPS,
  MAX_HOPS,
} from "./long-horizon.js";
export { multihopExpertTurns, MULTIHOP_MISTAKES, type MultihopMode } from "./expert.js";
export { MULTIHOP_SYSTEM_PROMPT, SEARCH_SYSTEM_PROMPT } from "./prompt.js";
