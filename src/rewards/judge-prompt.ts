/**
 * What a judge is asked, and how its answer is read.
 *
 * Two ways of asking, after two published recipes (the wording here is our own):
 *  - group: the judge sees every trajectory of one row at once and scores them against each other,
 *    as OpenPipe ART's RULER ranks a group. Group-relative estimators (GRPO, RLOO) only use the
 *    differences within a group, so a judge that compares is asked exactly what training uses.
 *  - single: one trajectory per call, graded on the rubric alone, as the tinker-cookbook's
 *    rubric-grading environments do; scores do not depend on the other samples.
 *
 * The answer is read strictly: the message must be one JSON object (a single ```json fence around
 * it is allowed), `scores` an array of exactly as many numbers as trajectories (group) or `score`
 * one number (single), each finite and in [0, 1]. Anything else is a malformed answer with a reason,
 * which the caller retries and never fills with a default.
 */
import type { ChatMessage } from "../model/chat-template.js";

export type JudgeMode = "group" | "single";

/** What the judge grades: the task's text and one rendered text per trajectory. */
export interface JudgeQuestion {
  task: string;
  trajectories: string[];
}

const GROUP_INSTRUCTIONS = [
  "You grade attempts an AI agent made at one task.",
  "Read the rubric, the task and every attempt. Compare the attempts with each other and give each a score",
  "from 0 (fails the rubric) to 1 (meets it fully); better attempts get higher scores, equally good ones equal scores.",
  'Answer with one JSON object and nothing else: {"scores": [s1, s2, ...]}, one number per attempt, in the order shown.',
].join(" ");

const SINGLE_INSTRUCTIONS = [
  "You grade one attempt an AI agent made at a task.",
  "Read the rubric, the task and the attempt, and give the attempt a score from 0 (fails the rubric) to 1 (meets it fully).",
  'Answer with one JSON object and nothing else: {"score": s}.',
].join(" ");

/** The chat messages of one judge call: group mode asks about all of `q.trajectories`, single mode about the one given. */
export function judgeMessages(mode: JudgeMode, rubric: string, q: JudgeQuestion): ChatMessage[] {
  const head = `Rubric:\n${rubric}\n\nTask:\n${q.task}`;
  if (mode === "single")
    return [
      { role: "system", content: SINGLE_INSTRUCTIONS },
      { role: "user", content: `${head}\n\nAttempt:\n${q.trajectories[0]}` },
    ];
  const attempts = q.trajectories.map((t, i) => `Attempt ${i + 1}:\n${t}`).join("\n\n");
  const count = `There are ${q.trajectories.length} attempts: "scores" holds ${q.trajectories.length} numbers.`;
  return [
    { role: "system", content: GROUP_INSTRUCTIONS },
    { role: "user", content: `${head}\n\n${attempts}\n\n${count}` },
  ];
}

/** Scores read from an answer, or why the answer is malformed. */
export type ParsedScores = { scores: number[] } | { malformed: string };

/** The start of an answer, for a reason: one line, at most 120 characters. */
function quote(text: string): string {
  const line = text.replace(/\s+/g, " ").trim();
  return JSON.stringify(line.length > 120 ? `${line.slice(0, 120)}...` : line);
}

/** The JSON object in `content`: the whole message, or the inside of one ```json fence. */
function answerObject(content: string): Record<string, unknown> | string {
  const fenced = /^```(?:json)?\s*\n([\s\S]*?)\n?```$/.exec(content.trim());
  let value: unknown;
  try {
    value = JSON.parse(fenced ? fenced[1] : content);
  } catch {
    return `the answer is not JSON: ${quote(content)}`;
  }
  if (value === null || typeof value !== "object" || Array.isArray(value))
    return `the answer is JSON but not an object: ${quote(content)}`;
  return value as Record<string, unknown>;
}

/** Why `x` is no score, or undefined when it is one (a finite number in [0, 1]). */
function badScore(x: unknown): string | undefined {
  if (typeof x !== "number") return `${JSON.stringify(x) ?? String(x)} is not a number`;
  if (!Number.isFinite(x) || x < 0 || x > 1) return `${x} is outside [0, 1]`;
  return undefined;
}

/** Reads a judge's message strictly (see the header): `expected` scores, or the reason it is malformed. */
export function parseJudgeAnswer(mode: JudgeMode, content: unknown, expected: number): ParsedScores {
  if (typeof content !== "string") return { malformed: "the answer has no message text" };
  const obj = answerObject(content);
  if (typeof obj === "string") return { malformed: obj };
  const key = mode === "group" ? "scores" : "score";
  if (!Object.hasOwn(obj, key)) return { malformed: `the answer has no "${key}": ${quote(content)}` };
  const raw = obj[key];
  const list = mode === "group" ? raw : [raw];
  if (!Array.isArray(list)) return { malformed: `"scores" is not an array: ${quote(content)}` };
  if (list.length !== expected)
    return { malformed: `"scores" holds ${list.length} numbers for ${expected} trajectories` };
  for (let i = 0; i < list.length; i++) {
    const why = badScore(list[i]);
    if (why) return { malformed: mode === "group" ? `score ${i + 1}: ${why}` : `"score": ${why}` };
  }
  return { scores: list as number[] };
}
