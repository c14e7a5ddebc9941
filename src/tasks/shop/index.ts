/** The web shop task (WebShop analogue): catalogue, instructions, pages, simulator, score, env, visible criteria, expert. */
export {
  createShopTask,
  shopOptionsSchema,
  shopTurn,
  SHOP_DATA_SOURCE,
  type ShopOptions,
  type ShopTask,
} from "./task.js";
export {
  generateCatalogue,
  CATEGORIES,
  PRODUCT_TYPES,
  ATTRIBUTES,
  OPTION_VALUES,
  MAX_CATALOGUE,
  formatPrice,
  type Catalogue,
  type Product,
  type ProductType,
  type Category,
} from "./catalogue.js";
export { makeGoal, goalQuery, optionPhrase, type Goal } from "./instructions.js";
export { generateGoals, canSatisfy, hasDistractor, expertScore } from "./goals.js";
export { buildShopSearch, productDocument, MAX_RESULTS, RESULTS_PER_PAGE, type ShopSearch } from "./search.js";
export {
  renderPage,
  availableActions,
  clickables,
  ITEM_CONTROLS,
  SUB_CONTROLS,
  type Page,
  type SubPage,
} from "./pages.js";
export { ShopSim, parseCommand, MAX_QUERY_CHARS, type ActResult, type Command } from "./simulator.js";
export { scorePurchase, typeFactor, type PurchaseScore } from "./score.js";
export {
  SHOP_SYSTEM_PROMPT,
  SHOP_TOOLS,
  envStepTool,
  renderPrompt,
  renderState,
  cutText,
  HISTORY_STEPS,
  HISTORY_OBSERVATION_CHARS,
  type HistoryEntry,
} from "./prompt.js";
export { ShopEnv, MAX_STEPS, rowGoal, actionCommand } from "./env.js";
export { expertSteps, SHOP_MISTAKES, type ShopMode, type ExpertStep } from "./expert.js";
export { listedMatch, missingOptions } from "./visible.js";
