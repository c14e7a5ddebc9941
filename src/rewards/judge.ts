/**
 * A judge reward: an LLM behind an OpenAI-compatible chat-completions endpoint scores trajectories
 * against a rubric (judge-prompt.ts says how it is asked: a whole group at once, or one trajectory
 * per call). `judgeReward(options)` checks the options (judge-config.ts) and returns the scorer;
 * `scoreGroups` takes groups of rendered trajectories (render-trajectory.ts) and gives each group
 * its scores, or no scores when the judge failed it.
 *
 * Failures are bounded and counted, never filled in: a call that cannot reach the judge, passes
 * `timeoutMs`, gets an HTTP error or a malformed answer is repeated up to `retries` times (after a
 * short pause, except for a malformed answer); then the group is dropped with the last reason. In
 * single mode one failed trajectory drops its whole group, since a group with a hole would skew the
 * others' baseline. At most `concurrency` calls are in flight, across every call of this scorer.
 * Good answers are cached (judge-cache.ts). The costs (calls, failed calls, cache hits, tokens from
 * the answers' `usage`, seconds) come back with each batch.
 */
import { parseJudgeConfig, judgeApiKey, type JudgeConfig, type JudgeOptions } from "./judge-config.js";
import { judgeMessages, parseJudgeAnswer, type JudgeQuestion } from "./judge-prompt.js";
import { callJudge, type JudgeEndpoint } from "./judge-client.js";
import { JudgeCache, judgeCacheKey } from "./judge-cache.js";

export type { JudgeQuestion } from "./judge-prompt.js";

/** One group's outcome: a score in [0, 1] per trajectory, or why the group is dropped. */
export type JudgeGroupResult = { scores: number[] } | { dropped: string };

/** What judging a batch cost, and what came of it. */
export interface JudgeStats {
  /** Requests sent (retries included) and those that failed (no answer, an HTTP error, a malformed answer). */
  calls: number;
  failedCalls: number;
  /** Questions answered from the cache, with no call. */
  cacheHits: number;
  promptTokens: number;
  completionTokens: number;
  /** Wall time of the batch. */
  seconds: number;
  groupsJudged: number;
  groupsDropped: number;
}

export interface JudgeReward {
  /** The settings, defaults filled in. */
  readonly config: JudgeConfig;
  /** reward = (1 − weight)·code + weight·judge. */
  readonly weight: number;
  /** Scores each group (in order); a group the judge failed is `{ dropped: reason }`. */
  scoreGroups(groups: JudgeQuestion[]): Promise<{ results: JudgeGroupResult[]; stats: JudgeStats }>;
}

/** Pause before repeating a call that got no usable answer from the server (not a malformed one). */
const retryPauseMs = (attempt: number) => Math.min(4000, 250 * 2 ** attempt);
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Runs at most `max` jobs at once; a finished job hands its slot to the next waiting one. */
function concurrencyLimit(max: number): <T>(job: () => Promise<T>) => Promise<T> {
  let active = 0;
  const waiting: (() => void)[] = [];
  return async (job) => {
    if (active < max) active++;
    else await new Promise<void>((r) => waiting.push(r));
    try {
      return await job();
    } finally {
      const next = waiting.shift();
      if (next) next();
      else active--;
    }
  };
}

const emptyStats = (): JudgeStats => ({
  calls: 0,
  failedCalls: 0,
  cacheHits: 0,
  promptTokens: 0,
  completionTokens: 0,
  seconds: 0,
  groupsJudged: 0,
  groupsDropped: 0,
});

/** A judge reward from its options (checked; an InputError of one line names a bad field). */
export function judgeReward(options: JudgeOptions, where = "judgeReward"): JudgeReward {
  const config = parseJudgeConfig(options, where);
  return new Judge(config, judgeApiKey(config, where));
}

class Judge implements JudgeReward {
  private readonly cache: JudgeCache;
  /** Questions being asked now: the same one asked again meanwhile waits for that answer. */
  private readonly pending = new Map<string, Promise<JudgeGroupResult>>();
  private readonly limit: <T>(job: () => Promise<T>) => Promise<T>;
  private readonly endpoint: JudgeEndpoint;

  constructor(
    readonly config: JudgeConfig,
    apiKey: string | undefined,
  ) {
    this.cache = new JudgeCache(config.cacheSize);
    this.limit = concurrencyLimit(config.concurrency);
    this.endpoint = { ...config, apiKey };
  }

  get weight(): number {
    return this.config.weight;
  }

  async scoreGroups(groups: JudgeQuestion[]): Promise<{ results: JudgeGroupResult[]; stats: JudgeStats }> {
    const t0 = performance.now();
    const stats = emptyStats();
    const results = await Promise.all(groups.map((g) => this.scoreGroup(g, stats)));
    for (const r of results) "scores" in r ? stats.groupsJudged++ : stats.groupsDropped++;
    stats.seconds = (performance.now() - t0) / 1000;
    return { results, stats };
  }

  /** Group mode: one question for the group; single mode: one per trajectory, all needed. */
  private async scoreGroup(g: JudgeQuestion, stats: JudgeStats): Promise<JudgeGroupResult> {
    if (this.config.mode === "group") return this.answer(g, stats);
    const each = await Promise.all(g.trajectories.map((t) => this.answer({ task: g.task, trajectories: [t] }, stats)));
    const failed = each.find((r) => "dropped" in r);
    return failed ?? { scores: each.flatMap((r) => ("scores" in r ? r.scores : [])) };
  }

  /** One question: from the cache, from the same question already being asked, or asked now. */
  private async answer(q: JudgeQuestion, stats: JudgeStats): Promise<JudgeGroupResult> {
    const c = this.config;
    const key = judgeCacheKey({ model: c.model, mode: c.mode, rubric: c.rubric, task: q.task, texts: q.trajectories });
    const hit = this.cache.get(key);
    const pending = this.pending.get(key);
    if (hit || pending) {
      stats.cacheHits++;
      return hit ? { scores: hit } : pending!;
    }
    const asked = this.ask(key, q, stats).finally(() => this.pending.delete(key));
    this.pending.set(key, asked);
    return asked;
  }

  /** Asks until a good answer (cached) or the retries run out. */
  private async ask(key: string, q: JudgeQuestion, stats: JudgeStats): Promise<JudgeGroupResult> {
    const c = this.config;
    const messages = judgeMessages(c.mode, c.rubric, q);
    let reason = "";
    for (let attempt = 0; attempt <= c.retries; attempt++) {
      const res = await this.limit(() => callJudge(this.endpoint, messages));
      stats.calls++;
      if ("failed" in res) {
        stats.failedCalls++;
        reason = res.failed;
        if (attempt < c.retries) await sleep(retryPauseMs(attempt));
        continue;
      }
      stats.promptTokens += res.usage.promptTokens;
      stats.completionTokens += res.usage.completionTokens;
      const parsed = parseJudgeAnswer(c.mode, res.content, q.trajectories.length);
      if ("scores" in parsed) {
        this.cache.set(key, parsed.scores);
        return parsed;
      }
      stats.failedCalls++;
      reason = parsed.malformed;
    }
    return { dropped: `${reason} (${c.retries + 1} calls)` };
  }
}
