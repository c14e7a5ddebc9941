/**
 * Ready-made tools for agents (the `javascript` sandbox, a `defineTool` tool), and the adapters that
 * make other libraries' tools and MCP servers' tools ours (./ecosystem.ts); see docs/agent-runtime.md.
 */
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
  linearJsonSchemaValidator,
  MAX_MCP_TOOL_PAGES,
  MAX_MCP_TOOLS,
  type AdapterOptions,
  type McpClientLike,
  type McpToolInfo,
  type McpServerSpec,
} from "./ecosystem.js";
