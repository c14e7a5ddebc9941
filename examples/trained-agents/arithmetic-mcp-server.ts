/**
 * The MCP server mcp-tools.ts trains with: `add` and `multiply` over stdio, written with the MCP
 * SDK's McpServer as any MCP server is. Started by the recipe's task.mcp as
 * `node arithmetic-mcp-server.js stdio` (or `npx tsx arithmetic-mcp-server.ts stdio`).
 */
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { z } from "zod";

export function arithmeticServer(): McpServer {
  const server = new McpServer({ name: "arithmetic", version: "1.0.0" });
  const pair = { a: z.number(), b: z.number() };
  server.registerTool("add", { description: "Adds two numbers.", inputSchema: pair }, async ({ a, b }) => ({
    content: [{ type: "text", text: String(a + b) }],
  }));
  server.registerTool("multiply", { description: "Multiplies two numbers.", inputSchema: pair }, async ({ a, b }) => ({
    content: [{ type: "text", text: String(a * b) }],
  }));
  return server;
}

if (process.argv[2] === "stdio") await arithmeticServer().connect(new StdioServerTransport());
