/**
 * The recording gateway's cost: the multihop task from the committed base, played by the built-in
 * rollout (ToolEnv) and by an agent of its own through the gateway (the `openai` client, driving the
 * same ToolEnv for its tools and reward), the same rows, seeds and limits, alternating R times after
 * one warm-up run of each (not counted); the prefix cache is emptied before every run, so no run
 * starts on what the one before it left. Throughput is sampled action tokens per second of wall
 * time. Prints one JSON line per run and
 *   {"builtin_tokens_per_s":x,"gateway_tokens_per_s":y,"throughput_kept":y/x,"episodes":n}
 *   npm run bench:rollout -- --gateway [--rows 16] [--n 4] [--repeats 2]
 */
import OpenAI from "openai";
import { fileURLToPath } from "node:url";
import { LocalEngine } from "../src/engine/local/local-engine.js";
import { rollout } from "../src/agent/rollout.js";
import { hermesFormat } from "../src/agent/formats/hermes.js";
import type { ToolEnv } from "../src/agent/tool-env.js";
import type { AgentMessage } from "../src/agent/chat-setup.js";
import { agentRollout, type Agent } from "../src/gateway/agent-rollout.js";
import { getTask, type TaskRow } from "../src/tasks/index.js";

export async function gatewayBench(o: { rows: number; n: number; repeats: number }): Promise<void> {
  const base = fileURLToPath(new URL("../../assets/base/multihop", import.meta.url));
  const engine = await LocalEngine.load(base);
  const task = getTask("multihop");
  const rows = task.rows("train").slice(0, o.rows);
  const limits = { maxTurns: 5, maxTokensPerTurn: 96, maxTotalTokens: 1024, temperature: 1 };

  /** The multihop ToolEnv, driven by an openai-client loop: its tools run the calls, its reward ends the episode. */
  const agent: Agent<TaskRow> = async (row, ctx) => {
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

  const tokens = (ts: { steps: { action: number[] }[] }[]) =>
    ts.reduce((s, t) => s + t.steps.reduce((a, x) => a + x.action.length, 0), 0);
  const results = { builtin: [] as number[], gateway: [] as number[] };
  try {
    for (let r = -1; r < o.repeats; r++) {
      for (const mode of r % 2 === 0 ? (["builtin", "gateway"] as const) : (["gateway", "builtin"] as const)) {
        await engine.clearPrefixCache();
        const t0 = performance.now();
        const res =
          mode === "builtin"
            ? await rollout(engine, (row: TaskRow) => task.makeEnv(row), rows, { n: o.n, seed: r, ...limits })
            : await agentRollout(engine, agent, rows, { n: o.n, seed: r, ...limits });
        const s = (performance.now() - t0) / 1000;
        const tps = tokens(res.trajectories) / s;
        if (r >= 0) results[mode].push(tps);
        console.log(
          JSON.stringify({
            run: mode,
            repeat: r < 0 ? "warm-up" : r,
            tokens_per_s: Math.round(tps),
            episodes: res.trajectories.length,
            failed: res.failed.length,
            seconds: Math.round(s * 100) / 100,
          }),
        );
      }
    }
  } finally {
    await engine.dispose();
  }
  const mean = (x: number[]) => x.reduce((a, b) => a + b, 0) / x.length;
  const b = mean(results.builtin),
    g = mean(results.gateway);
  console.log(
    JSON.stringify({
      builtin_tokens_per_s: Math.round(b),
      gateway_tokens_per_s: Math.round(g),
      throughput_kept: Math.round((g / b) * 1000) / 1000,
      episodes: o.rows * o.n,
    }),
  );
}
