/** The OpenAI-compatible HTTP server: over a model directory (it loads the local engine) or over an engine you give it. */
export { startServer, type ServeOptions, type RunningServer } from "./server.js";
export type { ServedEngine } from "./context.js";
