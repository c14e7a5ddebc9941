/**
 * The settings of a judge reward (`reward.judge` in a recipe, or `judgeReward({...})` in code): one
 * zod schema, so both are checked alike and a mistake is one line naming the field. The judge is any
 * OpenAI-compatible chat-completions endpoint; how it is asked and how its answer is read are in
 * judge-prompt.ts, the calls in judge-client.ts, the whole reward in judge.ts.
 */
import { z } from "zod";
import { InputError } from "../util/errors.js";

const positiveInt = z.number().int().positive();

/** http: or https: with a host; anything else (a bare host, file:, ftp:) is refused. */
export function isHttpUrl(text: string): boolean {
  try {
    const u = new URL(text);
    return (u.protocol === "http:" || u.protocol === "https:") && u.hostname !== "";
  } catch {
    return false;
  }
}

export const JUDGE_MODES = ["group", "single"] as const;

export const judgeConfigSchema = z
  .strictObject({
    url: z
      .string()
      .refine(isHttpUrl, { message: "must be an http(s) URL, e.g. http://127.0.0.1:8000/v1" })
      .describe(
        "The judge's OpenAI-compatible base URL (e.g. http://127.0.0.1:8000/v1 for `agent-r1 serve`); requests go to URL/chat/completions, or to URL itself when it already ends in /chat/completions.",
      ),
    model: z.string().min(1).describe("The model name the judge's requests ask for."),
    apiKey: z
      .string()
      .regex(/^\S+$/, "must be non-empty and without spaces")
      .optional()
      .describe(
        "Sent as `Authorization: Bearer KEY`; written into the run's config.yaml as given, so prefer apiKeyEnv.",
      ),
    apiKeyEnv: z
      .string()
      .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, "must be an environment variable's name")
      .optional()
      .describe("Or the name of an environment variable holding the key (read when the run opens; it must be set)."),
    rubric: z.string().min(1).describe("What a good trajectory does: the judge grades against this text."),
    mode: z
      .enum(JUDGE_MODES)
      .default("group")
      .describe(
        'group: one call sees all rollout.n trajectories of a row and answers {"scores": [...]} (they are ranked against each other); single: one call per trajectory, answering {"score": x}.',
      ),
    weight: z
      .number()
      .min(0)
      .max(1)
      .describe("reward = (1 − weight)·code + weight·judge, per trajectory; 1 is the judge alone."),
    maxChars: positiveInt
      .default(4000)
      .describe(
        "Characters of one rendered trajectory the judge sees at most (its start and end kept); the task text too.",
      ),
    maxTokens: positiveInt.default(512).describe("max_tokens of a judge answer."),
    temperature: z.number().nonnegative().default(0).describe("The judge's sampling temperature."),
    timeoutMs: positiveInt.default(60_000).describe("One judge call's time limit, ms; a call past it is a failure."),
    retries: z
      .number()
      .int()
      .nonnegative()
      .default(2)
      .describe(
        "Calls repeated after a failed one (unreachable, an HTTP error, a timeout, a malformed answer) before the group is dropped.",
      ),
    concurrency: positiveInt.default(4).describe("Judge calls in flight at most."),
    cacheSize: z
      .number()
      .int()
      .nonnegative()
      .default(10_000)
      .describe(
        "Answers kept, keyed by a hash of the rendered trajectories, rubric, model and mode; a repeat makes no call. 0 keeps none.",
      ),
  })
  .refine((j) => j.apiKey === undefined || j.apiKeyEnv === undefined, {
    message: "give apiKey or apiKeyEnv, not both",
    path: ["apiKeyEnv"],
  });

/** What `judgeReward` takes: the schema's input (defaults may be left out). */
export type JudgeOptions = z.input<typeof judgeConfigSchema>;
/** The settings with every default filled in. */
export type JudgeConfig = z.output<typeof judgeConfigSchema>;

/** The options checked, or an InputError of one line naming the field (`where` is how the caller names the section). */
export function parseJudgeConfig(options: unknown, where = "judgeReward"): JudgeConfig {
  const res = judgeConfigSchema.safeParse(options);
  if (res.success) return res.data;
  const issue = res.error.issues[0];
  const field = issue.path.map(String).join(".");
  const message =
    issue.code === "unrecognized_keys"
      ? `unknown key '${issue.keys[0]}'; allowed: ${Object.keys(judgeConfigSchema.shape).join(", ")}`
      : issue.code === "invalid_value"
        ? `must be one of ${issue.values.map((v) => JSON.stringify(v)).join(", ")}`
        : issue.message.replace(/^Invalid input: /, "");
  throw new InputError(`${where}: ${field ? `${field}: ` : ""}${message}`);
}

/** The key the judge's requests carry: the one given, or the named environment variable's (which must be set). */
export function judgeApiKey(cfg: JudgeConfig, where = "judgeReward"): string | undefined {
  if (cfg.apiKeyEnv === undefined) return cfg.apiKey;
  const key = process.env[cfg.apiKeyEnv];
  if (key === undefined || key === "")
    throw new InputError(
      `${where}: apiKeyEnv: the environment variable ${cfg.apiKeyEnv} is not set`,
      `set ${cfg.apiKeyEnv} to the judge's API key, or give none for a judge without one`,
    );
  if (!/^\S+$/.test(key))
    throw new InputError(`${where}: apiKeyEnv: ${cfg.apiKeyEnv} holds spaces; an API key has none`);
  return key;
}
