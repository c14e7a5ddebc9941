/**
 * A reference-answer judge behind the OpenAI chat-completions interface, for trying `reward.judge`
 * where no judge-capable language model is at hand (this project downloads none). It answers the
 * judge requests `reward.judge` sends (src/rewards/judge-prompt.ts): it finds the task's question
 * among the multi-hop rows of the world it was started with, reads each attempt's final
 * `<answer>...</answer>`, and scores it by token F1 against the reference answer (partial credit,
 * where the task's own reward is exact match). A language-model judge reads the same requests; this
 * one only knows the answers, so it shows the plumbing (HTTP, strict parsing, caching, costs in
 * metrics.jsonl), not what a model judge adds.
 *
 *   node --import tsx examples/judges/reference-judge.ts [--port 8799] [--option NAME=VALUE ...]
 *   npx agent-r1 main --config recipes/multihop-judge.yaml --base assets/base/multihop --out runs/judge
 *
 * `--option` takes the multihop task's options (the recipe's `task.options`), so the judge's world
 * is the trainer's.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { parseArgs } from "node:util";
import { createMultihopTask } from "agent-r1";
import { f1Score, renderTask } from "agent-r1/rewards";

const ANSWER = /<answer>([\s\S]*?)<\/answer>/g;

/** The last `<answer>` of an attempt's text, or undefined when it gave none. */
export function finalAnswer(attempt: string): string | undefined {
  let last: string | undefined;
  for (const m of attempt.matchAll(ANSWER)) last = m[1];
  return last;
}

/** The attempts of a judge request's user message: group mode "Attempt i:", single mode "Attempt:". */
export function attemptsOf(user: string): { task: string; attempts: string[] } {
  const [head, ...parts] = user.split(/\n\nAttempt(?: \d+)?:\n/);
  const last = parts.length - 1;
  if (last >= 0) parts[last] = parts[last].replace(/\n\nThere are \d+ attempts[^\n]*$/, "");
  return { task: head.replace(/^[\s\S]*?\n\nTask:\n/, ""), attempts: parts };
}

/** Question text -> reference answer, over every split of the task. */
function referenceAnswers(options: Record<string, unknown>): Map<string, string> {
  const task = createMultihopTask(options);
  const answers = new Map<string, string>();
  for (const split of ["train", "val", "test"] as const)
    // The task as the judge request shows it (uncut: multi-hop questions are far below its budget).
    for (const row of task.rows(split))
      answers.set(renderTask(row.prompt, Infinity).trim(), row.reward_model.ground_truth);
  return answers;
}

/** A request body as text (a judge request is a few kilobytes). */
export function readText(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    let text = "";
    req.setEncoding("utf8");
    req.on("data", (d: string) => (text += d));
    req.on("end", () => resolve(text));
    req.on("error", reject);
  });
}

function send(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { "Content-Type": "application/json" });
  res.end(JSON.stringify(body));
}

/** The judge's answer to one request: `{"scores": [...]}` or `{"score": s}`, or an error to send. */
export function judge(
  answers: Map<string, string>,
  system: string,
  user: string,
): { content: string } | { error: string } {
  const { task, attempts } = attemptsOf(user);
  const gold = answers.get(task.trim());
  if (gold === undefined) return { error: `no multihop question matches the task: ${task.slice(0, 80)}` };
  const scores = attempts.map((a) => {
    const answer = finalAnswer(a);
    return answer === undefined ? 0 : Math.round(f1Score(answer, gold).f1 * 1000) / 1000;
  });
  const single = /"score"/.test(system) && !/"scores"/.test(system);
  return { content: JSON.stringify(single ? { score: scores[0] ?? 0 } : { scores }) };
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: { port: { type: "string", default: "8799" }, option: { type: "string", multiple: true, default: [] } },
  });
  const options: Record<string, unknown> = {};
  for (const o of values.option) {
    const eq = o.indexOf("=");
    if (eq <= 0) throw new Error(`--option ${o}: expected NAME=VALUE`);
    const v = o.slice(eq + 1);
    options[o.slice(0, eq)] = /^-?\d+(\.\d+)?$/.test(v) ? Number(v) : v;
  }
  const answers = referenceAnswers(options);
  const server = createServer(async (req, res) => {
    if (req.method !== "POST" || !req.url?.endsWith("/chat/completions"))
      return send(res, 404, { error: { message: `no route ${req.method} ${req.url}` } });
    let body: { model?: string; messages?: { role: string; content: string }[] };
    try {
      body = JSON.parse(await readText(req)) as typeof body;
    } catch {
      return send(res, 400, { error: { message: "the body is not JSON" } });
    }
    const messages = body.messages ?? [];
    const text = (role: string) => messages.find((m) => m.role === role)?.content ?? "";
    const r = judge(answers, text("system"), text("user"));
    if ("error" in r) return send(res, 400, { error: { message: r.error } });
    send(res, 200, {
      id: "chatcmpl-reference",
      object: "chat.completion",
      model: body.model ?? "reference",
      choices: [{ index: 0, message: { role: "assistant", content: r.content }, finish_reason: "stop" }],
      // No usage: a rule reads no tokens (the run's judge_*_tokens stay 0; judge_seconds still counts).
    });
  });
  const port = Number(values.port);
  server.listen(port, "127.0.0.1", () => {
    const { port: bound } = server.address() as AddressInfo;
    console.log(`reference judge: ${answers.size} questions, http://127.0.0.1:${bound}/v1`);
  });
}

if (import.meta.url === `file://${process.argv[1]}`) void main();
