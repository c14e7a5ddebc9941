/** Ready-made tools for agents (each a `defineTool` tool; see docs/agent-runtime.md). */
export {
  javascriptTool,
  createJavaScriptTool,
  formatSandboxResult,
  JavaScriptSandbox,
  SANDBOX_DEFAULTS,
} from "./javascript.js";
export type {
  JavaScriptTool,
  JavaScriptToolOptions,
  JavaScriptSandboxOptions,
  SandboxStats,
  SandboxLimits,
  SandboxResult,
  SandboxErrorKind,
} from "./javascript.js";
export {
  fromAiSdkTools,
  fromAgentsSdkTools,
  mcpTools,
  connectMcp,
  type AdapterOptions,
  type McpClientLike,
  type McpServerSpec,
} from "./ecosystem.js";
