/**
 * The example reference-answer judge (examples/judges/reference-judge.ts) reads the requests the judge
 * reward sends: the task found among the multihop rows, each attempt's last <answer> scored by F1,
 * group and single mode, and a task it does not know refused.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { createMultihopTask } from "../src/tasks/multihop/index.js";
import { renderTask } from "../src/rewards/render-trajectory.js";
import { attemptsOf, finalAnswer, judge } from "../examples/judges/reference-judge.js";
import { judgeMessages } from "../src/rewards/judge-prompt.js";

const question = "user: Where was the founder of Acme born?";
const answers = new Map([[question, "Port Elm"]]);
const attempt = (answer: string) => `[turn 1] assistant (final turn):\n<think>hm</think><answer>${answer}</answer>`;

test("reference judge: group mode scores every attempt by F1 of its last answer, in order", () => {
  const [system, user] = judgeMessages("group", "right answers", {
    task: question,
    trajectories: [attempt("Port Elm"), attempt("Elm"), "[turn 1] assistant (final turn):\nno answer", attempt("Oslo")],
  });
  assert.deepEqual(attemptsOf(user.content).attempts.length, 4);
  const r = judge(answers, system.content, user.content);
  assert.ok("content" in r);
  assert.deepEqual(JSON.parse(r.content), { scores: [1, 0.667, 0, 0] });
});

test("reference judge: single mode answers {score}; the last <answer> counts; an unknown task is an error", () => {
  const [system, user] = judgeMessages("single", "right answers", {
    task: question,
    trajectories: [`${attempt("Oslo")}\n[turn 2] ${attempt("Port Elm")}`],
  });
  assert.equal(finalAnswer(user.content), "Port Elm");
  const r = judge(answers, system.content, user.content);
  assert.ok("content" in r);
  assert.deepEqual(JSON.parse(r.content), { score: 1 });
  const [s2, u2] = judgeMessages("group", "x", { task: "Who?", trajectories: [attempt("a")] });
  const bad = judge(answers, s2.content, u2.content);
  assert.ok("error" in bad && /no multihop question matches/.test(bad.error));
});

test("reference judge: the example runs as a server and grades a multihop question over HTTP", async () => {
  const script = fileURLToPath(new URL("../examples/judges/reference-judge.js", import.meta.url));
  const child = spawn(process.execPath, [script, "--port", "0"], { stdio: ["ignore", "pipe", "inherit"] });
  try {
    const url = await new Promise<string>((resolve, reject) => {
      let out = "";
      child.stdout.on("data", (d: Buffer) => {
        out += d.toString();
        const m = /(http:\/\/127\.0\.0\.1:\d+\/v1)/.exec(out);
        if (m) resolve(m[1]);
      });
      child.on("exit", (code) => reject(new Error(`the judge exited (${code}): ${out}`)));
    });
    const row = createMultihopTask({}).rows("test")[0];
    const gold = row.reward_model.ground_truth;
    const [system, user] = judgeMessages("group", "right answers", {
      task: renderTask(row.prompt, 4000),
      trajectories: [attempt(gold), attempt("nobody")],
    });
    const res = await fetch(`${url}/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "reference", messages: [system, user] }),
    });
    assert.equal(res.status, 200);
    const body = (await res.json()) as { choices: { message: { content: string } }[] };
    assert.deepEqual(JSON.parse(body.choices[0].message.content), { scores: [1, 0] });
  } finally {
    child.kill();
  }
});
