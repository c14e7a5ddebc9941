/** The household task (ALFWorld analogue): generated houses, six goal kinds, one env_step tool, a prompt rebuilt each step. */
export {
  createHouseholdTask,
  householdOptionsSchema,
  householdRow,
  kindWeights,
  HOUSEHOLD_DATA_SOURCE,
  type HouseholdOptions,
  type HouseholdTask,
} from "./task.js";
export {
  HouseholdEnv,
  envStepTool,
  episodeOf,
  openingPrompt,
  readCommand,
  DEFAULT_MAX_STEPS,
  MAX_COMMAND_CHARS,
  type HouseholdEpisode,
  type ReadCommand,
} from "./env.js";
export { House, parseCommand, normalizeCommand, type Command, type Condition } from "./simulator.js";
export { admissibleCommands, whyNotAdmissible } from "./admissible.js";
export { GOAL_KINDS, goalMet, goalText, type Goal, type GoalKind } from "./goals.js";
export { expertStep, expertPlan, type ExpertStep } from "./expert.js";
export { demonstrateRow, HOUSEHOLD_MISTAKES } from "./demos.js";
export {
  generateHouseholdTasks,
  kindSchedule,
  layoutPool,
  makeTask,
  type HouseholdItem,
  type KindWeights,
} from "./tasks.js";
export { generateLayout, layoutKey, placeObjects, type HouseWorld, type Layout, type Room } from "./world.js";
export {
  OBJECT_KINDS,
  RECEPTACLE_KINDS,
  ROOM_KINDS,
  partsFor,
  type ObjectKind,
  type ReceptacleKind,
  type RoomKind,
  type VocabPart,
} from "./vocab.js";
export { HOUSEHOLD_SYSTEM_PROMPT, userPrompt, stateText, type HistoryEntry } from "./prompt.js";
