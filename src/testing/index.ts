/**
 * Test kits for what users write against the agent runtime: the Env, Tool and tool-call format
 * conformance suites (node:test), a scripted Engine that needs no model, and ready tokenizers.
 *   import { toolConformance } from "agent-r1/testing";
 *   toolConformance(myTool, { valid: [{ q: "x" }], invalid: [{}] });
 */
export { envConformance, actionOf, HOSTILE_ACTIONS, type EnvConformanceOptions } from "./env-conformance.js";
export { toolConformance, type ToolConformanceOptions } from "./tool-conformance.js";
export { formatConformance } from "./format-conformance.js";
export { ScriptedEngine, assistantTurns, fakeLogprob, type Reply, type SampleCall } from "./scripted-engine.js";
export { chatmlTokenizer, llama3Tokenizer, LLAMA3_TEST_TEMPLATE, LLAMA3_SPECIAL } from "./tokenizers.js";
