/**
 * The judge reward (src/rewards/judge*.ts) against a scripted judge on loopback (a real node:http
 * server answering chat-completions JSON): group and single mode, strict parsing with bounded
 * retries, timeouts, the cache, dropped groups, costs; the combination with the code reward in
 * prepareBatch; a trainer run whose metrics.jsonl reward is the judge's; and `agent-r1 serve` (a
 * tiny random model, which answers garbage) as the judge of a training run that carries on.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { judgeReward, type JudgeReward } from "../src/rewards/judge.js";
import type { JudgeOptions } from "../src/rewards/judge-config.js";
import { parseJudgeAnswer } from "../src/rewards/judge-prompt.js";
import { renderTrajectory, truncateMiddle } from "../src/rewards/render-trajectory.js";
import { combineJudgeReward } from "../src/rewards/combine-judge.js";
import { TrajectoryBuilder } from "../src/agent/trajectory.js";
import { parseConfig } from "../src/train/load-config.js";
import { prepareBatch, type BatchJudge } from "../src/train/prepare-batch.js";
import { Trainer } from "../src/train/trainer.js";
import { initModel } from "../src/model/init-model.js";
import { fixtureTrajectories } from "./fixtures/prepare-batch-cases.js";
import { attemptsOf, scriptedJudge, type JudgeRequest, type ScriptedReply } from "./fixtures/scripted-judge.js";
import { toyConfig, toyEngines } from "./fixtures/train-toy.js";
import { toyTask } from "./fixtures/toy-task.js";
import { startServeChild, tempDir } from "./helpers.js";

const RUBRIC = "Higher quality is better.";

/** Scores a scripted judge reads off the attempts: each attempt's text says `quality Q`. */
const qualities = (req: JudgeRequest) => attemptsOf(req).map((a) => Number(/quality ([\d.]+)/.exec(a)?.[1] ?? 0));
const groupAnswer = (req: JudgeRequest): ScriptedReply => ({ content: JSON.stringify({ scores: qualities(req) }) });
const singleAnswer = (req: JudgeRequest): ScriptedReply => ({ content: JSON.stringify({ score: qualities(req)[0] }) });

const judgeAt = (url: string, o: Partial<JudgeOptions> = {}): JudgeReward =>
  judgeReward({ url, model: "judge-model", rubric: RUBRIC, weight: 1, ...o });

const group = (task: string, ...qs: number[]) => ({
  task,
  trajectories: qs.map((q, i) => `attempt ${i}: quality ${q}`),
});

test("group mode: one call per group ranks its trajectories; the request carries the rubric, task, model and key", async () => {
  const server = await scriptedJudge(groupAnswer);
  try {
    const judge = judgeAt(server.url, { apiKey: "sk-test", maxTokens: 64 });
    const { results, stats } = await judge.scoreGroups([group("task A", 0.9, 0.1, 0.5), group("task B", 0, 1)]);
    assert.deepEqual(results, [{ scores: [0.9, 0.1, 0.5] }, { scores: [0, 1] }]);
    assert.equal(server.requests.length, 2);
    const req = server.requests.find((r) => r.body.messages[1].content.includes("task A"))!;
    assert.equal(req.path, "/v1/chat/completions");
    assert.equal(req.body.model, "judge-model");
    assert.equal(req.body.max_tokens, 64);
    assert.equal(req.body.temperature, 0);
    assert.equal(req.authorization, "Bearer sk-test");
    assert.match(req.body.messages[1].content, /Rubric:\nHigher quality is better\./);
    assert.match(req.body.messages[0].content, /"scores"/);
    assert.equal(attemptsOf(req).length, 3);
    assert.deepEqual(
      { ...stats, seconds: 0 },
      {
        calls: 2,
        failedCalls: 0,
        cacheHits: 0,
        promptTokens: 200,
        completionTokens: 20,
        seconds: 0,
        groupsJudged: 2,
        groupsDropped: 0,
      },
    );
    assert.ok(stats.seconds > 0);
  } finally {
    await server.close();
  }
});

test('single mode: one call per trajectory, each answering {"score": x}', async () => {
  const server = await scriptedJudge(singleAnswer);
  try {
    const judge = judgeAt(server.url, { mode: "single" });
    const { results, stats } = await judge.scoreGroups([group("task A", 0.25, 0.75, 1)]);
    assert.deepEqual(results, [{ scores: [0.25, 0.75, 1] }]);
    assert.equal(stats.calls, 3);
    assert.ok(server.requests.every((r) => attemptsOf(r).length === 1 && /"score"/.test(r.body.messages[0].content)));
  } finally {
    await server.close();
  }
});

test("a malformed answer (not JSON) is retried, and the good second answer is used", async () => {
  const server = await scriptedJudge((req, k) =>
    k === 0 ? { content: "I think the first one is best." } : groupAnswer(req),
  );
  try {
    const { results, stats } = await judgeAt(server.url).scoreGroups([group("t", 0.2, 0.8)]);
    assert.deepEqual(results, [{ scores: [0.2, 0.8] }]);
    assert.equal(stats.calls, 2);
    assert.equal(stats.failedCalls, 1);
    assert.equal(stats.promptTokens, 200, "both answers' usage counts");
  } finally {
    await server.close();
  }
});

test("wrong count, out of range, non-number: retried up to the bound, then the group is dropped with the reason", async () => {
  const cases: [string, string, RegExp][] = [
    ["wrong count", '{"scores": [0.5, 0.5]}', /"scores" holds 2 numbers for 3 trajectories \(3 calls\)/],
    ["out of range", '{"scores": [0.5, 1.5, 0]}', /score 2: 1\.5 is outside \[0, 1\]/],
    ["non-number", '{"scores": [0.5, "0.7", 0]}', /score 2: "0\.7" is not a number/],
    ["no scores", '{"score": 0.5}', /has no "scores"/],
  ];
  for (const [name, content, reason] of cases) {
    const server = await scriptedJudge(() => ({ content }));
    try {
      const { results, stats } = await judgeAt(server.url, { retries: 2 }).scoreGroups([group("t", 0.1, 0.2, 0.3)]);
      assert.equal(server.requests.length, 3, name);
      assert.ok("dropped" in results[0], name);
      assert.match((results[0] as { dropped: string }).dropped, reason, name);
      assert.deepEqual([stats.groupsJudged, stats.groupsDropped, stats.failedCalls], [0, 1, 3], name);
    } finally {
      await server.close();
    }
  }
});

test("strict parsing by hand: one JSON object (a ```json fence allowed), exact count, finite numbers in [0, 1]", () => {
  assert.deepEqual(parseJudgeAnswer("group", '{"scores": [0, 1], "why": "x"}', 2), { scores: [0, 1] });
  assert.deepEqual(parseJudgeAnswer("group", '```json\n{"scores": [0.5]}\n```', 1), { scores: [0.5] });
  assert.deepEqual(parseJudgeAnswer("single", ' {"score": 0.3} ', 1), { scores: [0.3] });
  for (const [mode, content] of [
    ["group", "[0.5]"],
    ["group", 'Sure! {"scores": [0.5]}'],
    ["group", '{"scores": 0.5}'],
    ["group", '{"scores": [null]}'],
    ["group", '{"scores": [-0.1]}'],
    ["single", '{"score": true}'],
    ["single", '{"score": 2}'],
  ] as const)
    assert.ok("malformed" in parseJudgeAnswer(mode, content, 1), content);
  assert.ok("malformed" in parseJudgeAnswer("group", null, 1));
});

test("a judge that never answers: each call times out, the attempts are bounded, the group is dropped", async () => {
  const server = await scriptedJudge(() => ({ hang: true }));
  try {
    const { results, stats } = await judgeAt(server.url, { timeoutMs: 150, retries: 1 }).scoreGroups([
      group("t", 0, 1),
    ]);
    assert.equal(server.requests.length, 2);
    assert.deepEqual(results, [{ dropped: "no answer within 150 ms (2 calls)" }]);
    assert.deepEqual([stats.calls, stats.failedCalls, stats.groupsDropped], [2, 2, 1]);
  } finally {
    await server.close();
  }
});

test("an unreachable judge and HTTP errors are failures too: retried, counted, the group dropped", async () => {
  const gone = await scriptedJudge(groupAnswer);
  const url = gone.url;
  await gone.close();
  const down = await judgeAt(url, { retries: 1 }).scoreGroups([group("t", 0, 1)]);
  assert.ok("dropped" in down.results[0]);
  assert.deepEqual([down.stats.calls, down.stats.failedCalls, down.stats.groupsDropped], [2, 2, 1]);
  const flaky = await scriptedJudge((req, k) =>
    k === 0 ? { status: 503, body: '{"error":{"message":"overloaded"}}' } : groupAnswer(req),
  );
  try {
    const { results, stats } = await judgeAt(flaky.url).scoreGroups([group("t", 0.3, 0.6)]);
    assert.deepEqual(results, [{ scores: [0.3, 0.6] }]);
    assert.deepEqual([stats.calls, stats.failedCalls], [2, 1]);
  } finally {
    await flaky.close();
  }
});

test("cache: an identical group asked again (later, or in the same batch) makes no call; a changed one does", async () => {
  const server = await scriptedJudge(groupAnswer);
  try {
    const judge = judgeAt(server.url);
    const first = await judge.scoreGroups([group("t", 0.1, 0.9), group("t", 0.1, 0.9)]);
    assert.equal(server.requests.length, 1);
    assert.equal(first.stats.cacheHits, 1);
    assert.deepEqual(first.results[1], { scores: [0.1, 0.9] });
    const again = await judge.scoreGroups([group("t", 0.1, 0.9)]);
    assert.deepEqual([server.requests.length, again.stats.calls, again.stats.cacheHits], [1, 0, 1]);
    assert.deepEqual(again.results, [{ scores: [0.1, 0.9] }]);
    await judge.scoreGroups([group("t", 0.1, 0.8)]);
    assert.equal(server.requests.length, 2);
    const otherRubric = judgeAt(server.url, { rubric: "Shorter is better." });
    await otherRubric.scoreGroups([group("t", 0.1, 0.9)]);
    assert.equal(server.requests.length, 3, "the rubric is part of the key");
  } finally {
    await server.close();
  }
});

test("a failed group is dropped alone: the batch's other groups are judged, and failures are not cached", async () => {
  let bad = true;
  const server = await scriptedJudge((req) =>
    bad && req.body.messages[1].content.includes("task BAD") ? { content: "nope" } : groupAnswer(req),
  );
  try {
    const judge = judgeAt(server.url, { retries: 1 });
    const { results, stats } = await judge.scoreGroups([group("task OK", 0.4, 0.6), group("task BAD", 0.1, 0.2)]);
    assert.deepEqual(results[0], { scores: [0.4, 0.6] });
    assert.match((results[1] as { dropped: string }).dropped, /not JSON: "nope" \(2 calls\)/);
    assert.deepEqual([stats.groupsJudged, stats.groupsDropped, stats.calls], [1, 1, 3]);
    bad = false;
    const later = await judge.scoreGroups([group("task BAD", 0.1, 0.2)]);
    assert.deepEqual(later.results, [{ scores: [0.1, 0.2] }]);
  } finally {
    await server.close();
  }
});

test("concurrency: at most `concurrency` calls are in flight", async () => {
  const server = await scriptedJudge(singleAnswer, 30);
  try {
    const { stats } = await judgeAt(server.url, { mode: "single", concurrency: 2 }).scoreGroups([
      group("a", 0.1, 0.2, 0.3),
      group("b", 0.4, 0.5, 0.6),
    ]);
    assert.equal(stats.calls, 6);
    assert.ok(server.maxInFlight <= 2, `max in flight ${server.maxInFlight}`);
  } finally {
    await server.close();
  }
});

test("config: zod checks every field in one line naming it; the key may come from an environment variable", async () => {
  const base = { url: "http://127.0.0.1:1/v1", model: "m", rubric: "r", weight: 0.5 };
  assert.throws(
    () => judgeReward({ ...base, url: "ftp://host/v1" }),
    /^InputError: judgeReward: url: must be an http\(s\) URL/,
  );
  assert.throws(() => judgeReward({ ...base, weight: 1.5 }), /judgeReward: weight: Too big/);
  assert.throws(
    () => judgeReward({ ...base, mode: "pairs" as "group" }),
    /judgeReward: mode: must be one of "group", "single"/,
  );
  assert.throws(() => judgeReward({ ...base, rubrik: "x" } as JudgeOptions), /judgeReward: unknown key 'rubrik'/);
  assert.throws(
    () => judgeReward({ ...base, apiKey: "a", apiKeyEnv: "B" }),
    /apiKeyEnv: give apiKey or apiKeyEnv, not both/,
  );
  assert.throws(
    () => parseConfig({ reward: { judge: { ...base, url: "not a url" } } }),
    /^InputError: config: reward\.judge\.url: must be an http\(s\) URL/,
  );
  assert.throws(
    () => parseConfig({ reward: { judge: { ...base, model: undefined } } }),
    /config: reward\.judge\.model:/,
  );
  const name = "AGENT_R1_TEST_JUDGE_KEY";
  delete process.env[name];
  assert.throws(
    () => judgeReward({ ...base, apiKeyEnv: name }),
    /apiKeyEnv: the environment variable AGENT_R1_TEST_JUDGE_KEY is not set/,
  );
  const server = await scriptedJudge(groupAnswer);
  try {
    process.env[name] = "sk-from-env";
    await judgeAt(server.url, { apiKeyEnv: name }).scoreGroups([group("t", 0.5)]);
    assert.equal(server.requests[0].authorization, "Bearer sk-from-env");
  } finally {
    delete process.env[name];
    await server.close();
  }
  const parsed = parseConfig({ reward: { judge: base } }).reward.judge!;
  assert.deepEqual(
    [parsed.mode, parsed.retries, parsed.timeoutMs, parsed.concurrency, parsed.maxChars],
    ["group", 2, 60_000, 4, 4000],
  );
  assert.equal(parseConfig({}).reward.judge, undefined);
});

test("rendering: turns, tool calls with results, the end; a long text keeps its start and end within the budget", () => {
  const letters = { decode: (ids: number[]) => ids.map((i) => String.fromCharCode(96 + i)).join("") };
  const b = new TrajectoryBuilder("t", 0, 0);
  const step = (action: number[], observation: number[], calls: boolean) => ({
    action,
    logprobs: action.map(() => -1),
    stopReason: "stop" as const,
    observation,
    reward: 0,
    done: !calls,
    toolCalls: calls
      ? [
          {
            index: 0,
            turn: 0,
            name: "search",
            arguments: { q: "river" },
            raw: "",
            ok: true,
            text: "the Ise flows east",
            startedAt: 0,
            durationMs: 1,
          },
        ]
      : [],
    info: {},
    timing: { sampleMs: 0, envMs: 0 },
  });
  b.add([1], step([1, 2, 3], [4], true));
  b.add([1, 1, 2, 3, 4], step([5, 6], [], false));
  const text = renderTrajectory(b.finish("done"), letters, 1000);
  assert.equal(
    text,
    [
      "[turn 1] assistant:",
      "abc",
      '[turn 1] tool search {"q":"river"} ->',
      "the Ise flows east",
      "[turn 2] assistant (final turn):",
      "ef",
      "[end] the episode ended with the final turn",
    ].join("\n"),
  );
  const long = "S".repeat(500) + "M".repeat(2000) + "E".repeat(500);
  const cut = truncateMiddle(long, 300);
  assert.ok(cut.length <= 300, `${cut.length}`);
  assert.ok(cut.startsWith("SSS") && cut.endsWith("EEE") && cut.includes("characters cut"));
  assert.equal(truncateMiddle("short", 300), "short");
});

test("combination with the code reward in prepareBatch: (1 − w)·code + w·judge; a group the judge failed is dropped and counted", async () => {
  assert.equal(combineJudgeReward(0.4, 1, 0), 0.4);
  assert.equal(combineJudgeReward(0.4, 1, 1), 1);
  assert.equal(combineJudgeReward(0.4, 1, 0.25), 0.55);
  // Groups: 0 = a0 a1 a2 (code scores 1, 0, 0.5), 1 = b0 b1 (failed by the judge), 2 = c0 c1 (code 0.5, 0.5), 3 = d0.
  const byRow: Record<number, number[] | undefined> = { 0: [1, 0, 0.5], 1: undefined, 2: [0.2, 0.8], 3: [0.3] };
  const stats = {
    calls: 3,
    failedCalls: 1,
    cacheHits: 0,
    promptTokens: 9,
    completionTokens: 3,
    seconds: 0.1,
    groupsJudged: 3,
    groupsDropped: 1,
  };
  const judge: BatchJudge = {
    weight: 0.5,
    score: async (ts) => {
      const seen = new Map<number, number>();
      const scores = ts.map((t) => {
        const k = seen.get(t.rowIndex) ?? 0;
        seen.set(t.rowIndex, k + 1);
        return byRow[t.rowIndex]?.[k];
      });
      return { scores, stats, dropped: [{ rowIndex: 1, reason: "not JSON" }] };
    },
  };
  const b = await prepareBatch(
    fixtureTrajectories(),
    parseConfig({ algorithm: { estimator: "dr-grpo" } }),
    { judge },
    0,
  );
  // Group 3 (one trajectory) is constant and filtered as before; group 2, constant in code, varies with the judge.
  assert.deepEqual(
    b.kept.map((t) => t.id),
    ["a0", "a1", "a2", "c0", "c1"],
  );
  assert.equal(b.droppedGroups, 3, "b0, b1 (judge) and d0 (constant)");
  assert.deepEqual(b.judge!.dropped, [{ rowIndex: 1, reason: "not JSON" }]);
  assert.deepEqual(b.judge!.scores, [1, 0, 0.5, 0.2, 0.8, 0.3]);
  assert.equal(b.judge!.stats, stats);
  // Dr. GRPO: A = s − group mean on every action token. Group 0: s = 0.5·code + 0.5·judge = 1, 0, 0.5.
  const adv = (seq: number) =>
    b.datums.filter((d) => d.sequence === seq).flatMap((d) => d.advantages!.filter((_, i) => d.weights[i] > 0));
  const close = (xs: number[], want: number) => xs.every((x) => Math.abs(x - want) < 1e-9);
  assert.ok(close(adv(0), 0.5) && close(adv(1), -0.5) && close(adv(2), 0), "group 0");
  // Group 2: 0.5·0.5 + 0.5·0.2 = 0.35 and 0.65, mean 0.5.
  assert.ok(close(adv(3), -0.15) && close(adv(4), 0.15), "group 2");
});

const metricLines = (out: string) =>
  readFileSync(join(out, "metrics.jsonl"), "utf8")
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as Record<string, number>);

test("a trainer run with a scripted judge (weight 1): the judge's scores are metrics.jsonl's reward, with its costs", async () => {
  // Scores by position in the group, so every group of four varies and means 0.25.
  const server = await scriptedJudge((req) => ({
    content: JSON.stringify({ scores: attemptsOf(req).map((_, i) => i / 10 + 0.1) }),
  }));
  const out = tempDir();
  try {
    const cfg = toyConfig(2);
    cfg.reward.judge = parseConfig({
      reward: { judge: { url: server.url, model: "m", rubric: RUBRIC, weight: 1 } },
    }).reward.judge;
    const t = await Trainer.open(cfg, { out, task: toyTask(), engines: toyEngines() });
    await t.run();
    await t.close();
    const m = metricLines(out);
    assert.deepEqual(
      m.map((x) => x.iteration),
      [1, 2],
    );
    for (const x of m) {
      assert.ok(Math.abs(x.reward - 0.25) < 1e-9, `reward ${x.reward}`);
      assert.ok(Math.abs(x.judge_score - 0.25) < 1e-9);
      assert.equal(typeof x.code_reward, "number");
      assert.equal(x.judge_calls, 2, "batchSize 2: one call per group");
      assert.equal(x.judge_prompt_tokens, 200);
      assert.equal(x.judge_completion_tokens, 20);
      assert.equal(x.judge_groups_dropped, 0);
      assert.ok(x.judge_s > 0);
    }
    assert.equal(server.requests.length, 4);
  } finally {
    await server.close();
  }
});

test("a judge in code and in the recipe at once is refused before the run directory is touched", async () => {
  const cfg = toyConfig(1);
  const opts = { url: "http://127.0.0.1:1/v1", model: "m", rubric: "r", weight: 1 };
  cfg.reward.judge = parseConfig({ reward: { judge: opts } }).reward.judge;
  const out = tempDir();
  await assert.rejects(
    Trainer.open(cfg, { out, task: toyTask(), engines: toyEngines(), judge: judgeReward(opts) }),
    /reward\.judge: a judge was also given in code/,
  );
  assert.deepEqual(readdirSync(out), []);
});

test("end to end: `agent-r1 serve` (a tiny random model) as the judge; its garbage is retried, the groups dropped and counted, the run goes on", async () => {
  const modelDir = join(tempDir("agent-r1-judge-"), "tiny");
  await initModel({ preset: "tiny", out: modelDir });
  const serve = await startServeChild(modelDir);
  const out = tempDir();
  const logs: string[] = [];
  try {
    const url = `${/on (http:\/\/\S+)$/.exec(serve.line)![1]}/v1`;
    const cfg = toyConfig(1);
    cfg.reward.judge = parseConfig({
      reward: { judge: { url, model: "tiny", rubric: RUBRIC, weight: 0.5, maxTokens: 8, maxChars: 400, retries: 1 } },
    }).reward.judge;
    const t = await Trainer.open(cfg, { out, task: toyTask(), engines: toyEngines(), log: (l) => logs.push(l) });
    await t.run();
    await t.close();
    const [m] = metricLines(out);
    assert.equal(m.iteration, 1);
    assert.equal(m.judge_calls, 4, "two groups, each asked twice (retries 1)");
    assert.equal(m.judge_failed_calls, 4);
    assert.equal(m.judge_groups_dropped, 2);
    assert.ok(m.judge_prompt_tokens > 0 && m.judge_completion_tokens > 0, "serve answered, with usage");
    assert.equal(m.groups_dropped, 8, "all 8 trajectories left the batch with their groups");
    assert.equal(m.reward, m.code_reward, "nothing judged: the reward stays the code reward");
    assert.ok(
      logs.some((l) =>
        /^iteration 1: the judge failed 2 of 2 groups, left out of the batch; first: row \d of the batch: /.test(l),
      ),
      logs.join("\n"),
    );
  } finally {
    serve.child.kill();
    await serve.exited;
  }
});
