/** Session experiment (issue 6 warm start), kept so docs/main-job.md figures can be reproduced. */
import { getTask } from "../../src/tasks/index.js";
import { buildTaskTokenizer } from "../../src/train/task-tokenizer.js";
import { Tokenizer } from "../../src/model/tokenizer.js";
import { chatSetup, renderMessages } from "../../src/agent/chat-setup.js";
import { defaultTokenizerDir } from "../../src/model/default-tokenizer.js";
const task = getTask("multihop");
const rows = task.rows("train");
const demos = task.demonstrations(rows.slice(0, 50), { seed: 1, quality: 1 });
const split = (process.env.SPLIT ?? "words") as "words";
const minFrequency = Number(process.env.MIN_FREQ ?? 40);
for (const v of [0, ...process.argv.slice(2).map(Number)]) {
  const t0 = Date.now();
  const dir = v === 0 ? defaultTokenizerDir() : (await buildTaskTokenizer(task, { vocabSize: v, out: `/tmp/mj/tok-${split}-${v}`, split, minFrequency })).dir;
  const tok = Tokenizer.fromDir(dir);
  const chat = chatSetup(tok);
  const tools = task.makeEnv(rows[0]).tools;
  let prompt = 0, total = 0, assist = 0;
  for (const [i, d] of demos.entries()) {
    prompt += tok.encode(renderMessages(chat, d.slice(0, 2), { tools, addGenerationPrompt: true })).length;
    total += tok.encode(renderMessages(chat, d, { tools, addGenerationPrompt: false })).length;
    for (const m of d.filter((m) => m.role === "assistant")) assist += tok.encode(m.content).length + 1;
  }
  console.log(`${split} minFreq ${minFrequency} vocab ${v} (${tok.vocabSize}) in ${Date.now() - t0} ms: prompt ${prompt / 50} total ${total / 50} assistant ${assist / 50}`);
}
console.log(renderMessages(chatSetup(Tokenizer.fromDir(defaultTokenizerDir())), demos[0], { tools: task.makeEnv(rows[0]).tools, addGenerationPrompt: false }));
