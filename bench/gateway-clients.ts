/**
 * The same multihop agent written with four client libraries, for the gateway's cost per client
 * (bench/gateway.ts). Each starts from the multihop ToolEnv's first messages (its system prompt and
 * question), offers the task's tools (search, calculator) as its library declares tools, lets the
 * library run its own tool loop against the episode's URL, and scores the final text with a fresh
 * ToolEnv of the task (its outcome reward for an answer at turn 0). Only the openai loop hands the
 * calls to the ToolEnv itself, so its episodes match the built-in rollout's tool handling exactly.
 */
import OpenAI from "openai";
import { generateText, jsonSchema, stepCountIs, tool as aiTool } from "ai";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import {
  Agent as SdkAgent,
  OpenAIChatCompletionsModel,
  run,
  setTracingDisabled,
  tool as sdkTool,
} from "@openai/agents";
import { createReactAgent } from "@langchain/langgraph/prebuilt";
import { ChatOpenAI } from "@langchain/openai";
import { tool as lcTool } from "@langchain/core/tools";
import { hermesFormat } from "../src/agent/formats/hermes.js";
import type { ToolEnv } from "../src/agent/tool-env.js";
import type { AgentMessage } from "../src/agent/chat-setup.js";
import type { AnyTool } from "../src/agent/tool.js";
import type { Agent, AgentContext } from "../src/gateway/agent-rollout.js";
import type { Task, TaskRow } from "../src/tasks/index.js";

export const CLIENTS = ["openai", "ai-sdk", "agents-sdk", "langgraph"] as const;
export type ClientName = (typeof CLIENTS)[number];

export interface BenchLimits {
  maxTurns: number;
  maxTokensPerTurn: number;
}

setTracingDisabled(true);

/** The env's first messages: its system prompt and the question. */
async function opening(task: Task, row: TaskRow): Promise<{ system: string; question: string }> {
  const env = task.makeEnv(row) as ToolEnv<TaskRow>;
  const { messages } = (await env.reset(row)) as { messages: AgentMessage[] };
  const system = messages.find((m) => m.role === "system")?.content ?? "";
  const question = messages.filter((m) => m.role === "user").at(-1)?.content ?? "";
  return { system, question };
}

/** The task's outcome reward for `text` as a final answer. */
async function rewardOf(task: Task, row: TaskRow, text: string): Promise<number> {
  const env = task.makeEnv(row);
  await env.reset(row);
  const step = await env.step({ text, tokens: [], logprobs: [], stopReason: "stop", turn: 0 });
  return step.reward;
}

/** Runs one of the env's tools as a library's tool: checked arguments, the tool's text back. */
function runner(row: TaskRow, ctx: AgentContext) {
  let calls = 0;
  return async (t: AnyTool, args: unknown): Promise<string> => {
    const checked = await t.validate(args);
    if (!checked.success) return `Error: ${checked.error}`;
    const out = await t.execute(checked.data, {
      signal: ctx.signal,
      row,
      groundTruth: row.reward_model?.ground_truth,
      callIndex: calls++,
      turn: 0,
    });
    return typeof out === "string" ? out : out.text;
  };
}

/** The `openai` client's chat-completions loop; the ToolEnv runs the calls and gives the reward. */
function openaiAgent(task: Task, tools: AnyTool[], limits: BenchLimits): Agent<TaskRow> {
  return async (row, ctx) => {
    const env = task.makeEnv(row) as ToolEnv<TaskRow>;
    const first = (await env.reset(row)) as { messages: AgentMessage[] };
    const client = new OpenAI({ baseURL: ctx.baseURL, apiKey: ctx.apiKey, maxRetries: 0 });
    const messages = first.messages.map((m) => ({
      role: m.role,
      content: m.content,
    })) as OpenAI.ChatCompletionMessageParam[];
    const tools = env.tools as OpenAI.ChatCompletionTool[];
    for (let turn = 0; turn < limits.maxTurns; turn++) {
      const res = await client.chat.completions.create({
        model: ctx.model,
        messages,
        tools,
        max_tokens: limits.maxTokensPerTurn,
      });
      const msg = res.choices[0].message;
      messages.push(msg);
      const calls = (msg.tool_calls ?? []).filter((c) => c.type === "function");
      const text = [
        msg.content ?? "",
        ...calls.map((c) => hermesFormat.write({ name: c.function.name, arguments: JSON.parse(c.function.arguments) })),
      ]
        .filter(Boolean)
        .join("\n");
      const step = await env.step({ text, tokens: [], logprobs: [], stopReason: "stop", turn });
      if (step.done) return step.reward;
      const results = (step.observation as { messages?: AgentMessage[] }).messages ?? [];
      results.forEach((m, i) =>
        messages.push({ role: "tool", tool_call_id: calls[i]?.id ?? `call_${i}`, content: m.content }),
      );
    }
    return 0;
  };
}

/** The AI SDK: `generateText` with the tools, over `createOpenAICompatible`. */
function aiSdkAgent(task: Task, tools: AnyTool[], limits: BenchLimits): Agent<TaskRow> {
  return async (row, ctx) => {
    const { system, question } = await opening(task, row);
    const call = runner(row, ctx);
    const aiTools = Object.fromEntries(
      tools.map((t) => [
        t.name,
        aiTool({
          description: t.description,
          inputSchema: jsonSchema(t.parameters),
          execute: (args: unknown) => call(t, args),
        }),
      ]),
    );
    const policy = createOpenAICompatible({ name: "policy", baseURL: ctx.baseURL, apiKey: ctx.apiKey });
    const { text } = await generateText({
      model: policy(ctx.model),
      system,
      prompt: question,
      tools: aiTools,
      stopWhen: stepCountIs(limits.maxTurns),
      maxOutputTokens: limits.maxTokensPerTurn,
      maxRetries: 0,
      abortSignal: ctx.signal,
    });
    return rewardOf(task, row, text);
  };
}

/** The OpenAI Agents SDK: an `Agent` run by `run`, on a chat-completions model. */
function agentsSdkAgent(task: Task, tools: AnyTool[], limits: BenchLimits): Agent<TaskRow> {
  return async (row, ctx) => {
    const { system, question } = await opening(task, row);
    const call = runner(row, ctx);
    const client = new OpenAI({ baseURL: ctx.baseURL, apiKey: ctx.apiKey, maxRetries: 0 });
    const agent = new SdkAgent({
      name: "searcher",
      instructions: system,
      tools: tools.map((t) =>
        sdkTool({
          name: t.name,
          description: t.description,
          parameters: t.parameters as never,
          strict: false,
          execute: (args: unknown) => call(t, args),
        }),
      ),
      model: new OpenAIChatCompletionsModel(client, ctx.model),
      modelSettings: { maxTokens: limits.maxTokensPerTurn },
    });
    try {
      const result = await run(agent, question, { maxTurns: limits.maxTurns, signal: ctx.signal });
      return rewardOf(task, row, typeof result.finalOutput === "string" ? result.finalOutput : "");
    } catch (e) {
      // The SDK throws when the turns run out; the episode (truncated by the gateway or not) scores 0.
      if ((e as Error).name === "MaxTurnsExceededError") return 0;
      throw e;
    }
  };
}

/** LangGraph's `createReactAgent` over LangChain's `ChatOpenAI`. */
function langGraphAgent(task: Task, tools: AnyTool[], limits: BenchLimits): Agent<TaskRow> {
  return async (row, ctx) => {
    const { system, question } = await opening(task, row);
    const call = runner(row, ctx);
    const llm = new ChatOpenAI({
      model: ctx.model,
      apiKey: ctx.apiKey,
      configuration: { baseURL: ctx.baseURL },
      maxTokens: limits.maxTokensPerTurn,
      maxRetries: 0,
    });
    const lcTools = tools.map((t) =>
      lcTool((args: unknown) => call(t, args), {
        name: t.name,
        description: t.description,
        schema: t.parameters as never,
      }),
    );
    const graph = createReactAgent({ llm, tools: lcTools, prompt: system });
    try {
      const state = await graph.invoke(
        { messages: [{ role: "user", content: question }] },
        { recursionLimit: 2 * limits.maxTurns, signal: ctx.signal },
      );
      const last = state.messages[state.messages.length - 1];
      return rewardOf(task, row, typeof last?.content === "string" ? last.content : "");
    } catch (e) {
      // LangGraph throws when the recursion limit is reached; the episode scores 0.
      if ((e as Error).name === "GraphRecursionError") return 0;
      throw e;
    }
  };
}

/** `name`'s agent on `task`, whose env offers `tools` (the same tools, run by the library's own loop). */
export function clientAgent(name: ClientName, task: Task, tools: AnyTool[], limits: BenchLimits): Agent<TaskRow> {
  switch (name) {
    case "openai":
      return openaiAgent(task, tools, limits);
    case "ai-sdk":
      return aiSdkAgent(task, tools, limits);
    case "agents-sdk":
      return agentsSdkAgent(task, tools, limits);
    case "langgraph":
      return langGraphAgent(task, tools, limits);
  }
}
