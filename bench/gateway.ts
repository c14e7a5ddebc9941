/**
 * The recording gateway's cost: the multihop task from the committed base, played by the built-in
 * rollout (ToolEnv) and, through the gateway, by the same agent written with each client library
 * (bench/gateway-clients.ts: the `openai` client, the AI SDK, the OpenAI Agents SDK, LangGraph),
 * on the same rows, seeds and limits. After one warm-up run of each (not counted) they run R times,
 * in an order that rotates each repeat; the prefix cache is emptied before every run, so no run
 * starts on what the one before it left. Throughput is sampled action tokens per second of wall
 * time. Prints one JSON line per run, one per client:
 *   {"client":"openai","tokens_per_s":y,"throughput_kept":y/x,"requests_per_episode":r,...}
 * and last
 *   {"builtin_tokens_per_s":x,"gateway_tokens_per_s":y,"throughput_kept":y/x,"episodes":n}
 * where the gateway's figure is the `openai` client's (the one whose loop hands calls to the same
 * ToolEnv as the built-in rollout).
 *   npm run bench:rollout -- --gateway [--rows 16] [--n 4] [--repeats 2] [--clients openai,ai-sdk,agents-sdk,langgraph]
 */
import { fileURLToPath } from "node:url";
import { LocalEngine } from "../src/engine/local/local-engine.js";
import { rollout } from "../src/agent/rollout.js";
import { agentRollout } from "../src/gateway/agent-rollout.js";
import { getTask } from "../src/tasks/index.js";
import type { MultihopTask } from "../src/tasks/multihop/task.js";
import { searchTool } from "../src/tasks/multihop/search.js";
import { calculatorTool } from "../src/tasks/calc/calculator-tool.js";
import { CLIENTS, clientAgent, type ClientName } from "./gateway-clients.js";

type Mode = "builtin" | ClientName;

export async function gatewayBench(o: { rows: number; n: number; repeats: number; clients?: string }): Promise<void> {
  const clients = (o.clients ?? CLIENTS.join(",")).split(",") as ClientName[];
  for (const c of clients)
    if (!CLIENTS.includes(c)) throw new Error(`--clients: unknown client '${c}' (one of ${CLIENTS.join(", ")})`);
  const base = fileURLToPath(new URL("../../assets/base/multihop", import.meta.url));
  const engine = await LocalEngine.load(base);
  const task = getTask("multihop") as MultihopTask;
  const tools = [searchTool(task.index, task.options.topK), calculatorTool];
  const rows = task.rows("train").slice(0, o.rows);
  const limits = { maxTurns: 5, maxTokensPerTurn: 96, maxTotalTokens: 1024, temperature: 1 };
  const agents = new Map(clients.map((c) => [c, clientAgent(c, task, tools, limits)]));
  const modes: Mode[] = ["builtin", ...clients];

  const tokens = (ts: { steps: { action: number[] }[] }[]) =>
    ts.reduce((s, t) => s + t.steps.reduce((a, x) => a + x.action.length, 0), 0);
  const rates = new Map<Mode, number[]>(modes.map((m) => [m, []]));
  const requests = new Map<Mode, number[]>(modes.map((m) => [m, []]));
  try {
    for (let r = -1; r < o.repeats; r++) {
      const shift = ((r % modes.length) + modes.length) % modes.length;
      for (const mode of [...modes.slice(shift), ...modes.slice(0, shift)]) {
        await engine.clearPrefixCache();
        const t0 = performance.now();
        const opts = { n: o.n, seed: r, ...limits };
        const res =
          mode === "builtin"
            ? await rollout(engine, (row) => task.makeEnv(row), rows, opts)
            : await agentRollout(engine, agents.get(mode)!, rows, { ...opts, log: () => {} });
        const s = (performance.now() - t0) / 1000;
        const tps = tokens(res.trajectories) / s;
        const episodes = res.trajectories.length + res.failed.length;
        const gw = (res.metrics as { gateway?: { requests: number } }).gateway;
        if (r >= 0) {
          rates.get(mode)!.push(tps);
          if (gw) requests.get(mode)!.push(gw.requests / Math.max(1, episodes));
        }
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
  const mean = (x: number[]) => x.reduce((a, b) => a + b, 0) / Math.max(1, x.length);
  const b = mean(rates.get("builtin")!);
  for (const c of clients)
    console.log(
      JSON.stringify({
        client: c,
        tokens_per_s: Math.round(mean(rates.get(c)!)),
        throughput_kept: Math.round((mean(rates.get(c)!) / b) * 1000) / 1000,
        requests_per_episode: Math.round(mean(requests.get(c)!) * 100) / 100,
      }),
    );
  const g = clients.includes("openai") ? mean(rates.get("openai")!) : NaN;
  console.log(
    JSON.stringify({
      builtin_tokens_per_s: Math.round(b),
      gateway_tokens_per_s: Math.round(g),
      throughput_kept: Math.round((g / b) * 1000) / 1000,
      episodes: o.rows * o.n,
    }),
  );
}
