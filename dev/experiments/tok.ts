/**
 * Episode length by tokenizer: 50 expert demonstrations of the multi-hop task, tokens per episode
 * (prompt, whole episode, assistant tokens) with the shipped tokenizer and a task tokenizer of each
 * given size, written to OUT_DIR/tok-SPLIT-SIZE (dev/LOG.md, 2026-11-22).
 * Environment: SPLIT (words), MIN_FREQ (40).
 */
import { join } from "node:path";
import { getTask } from "../../src/tasks/index.js";
import { buildTaskTokenizer } from "../../src/train/task-tokenizer.js";
import { Tokenizer } from "../../src/model/tokenizer.js";
import { chatSetup, renderMessages } from "../../src/agent/chat-setup.js";
import { defaultTokenizerDir } from "../../src/model/default-tokenizer.js";
import { required } from "./usage.js";

const USAGE = "[SPLIT=words] [MIN_FREQ=40] node --import tsx dev/experiments/tok.ts OUT_DIR [vocabulary size ...]";
const [outArg, ...sizes] = process.argv.slice(2);
const out = required(outArg, "OUT_DIR", USAGE);
const task = getTask("multihop");
const rows = task.rows("train");
const demos = task.demonstrations(rows.slice(0, 50), { seed: 1, quality: 1 });
const split = (process.env.SPLIT ?? "words") as "words";
const minFrequency = Number(process.env.MIN_FREQ ?? 40);
const tools = task.makeEnv(rows[0]).tools;
for (const v of [0, ...sizes.map(Number)]) {
  const t0 = Date.now();
  const dir =
    v === 0
      ? defaultTokenizerDir()
      : (await buildTaskTokenizer(task, { vocabSize: v, out: join(out, `tok-${split}-${v}`), split, minFrequency }))
          .dir;
  const tok = Tokenizer.fromDir(dir);
  const chat = chatSetup(tok);
  let prompt = 0,
    total = 0,
    assist = 0;
  for (const d of demos) {
    prompt += tok.encode(renderMessages(chat, d.slice(0, 2), { tools, addGenerationPrompt: true })).length;
    total += tok.encode(renderMessages(chat, d, { tools, addGenerationPrompt: false })).length;
    for (const m of d.filter((m) => m.role === "assistant")) assist += tok.encode(m.content).length + 1;
  }
  console.log(
    `${split} minFreq ${minFrequency} vocab ${v} (${tok.vocabSize}) in ${Date.now() - t0} ms: prompt ${prompt / 50} total ${total / 50} assistant ${assist / 50}`,
  );
}
console.log(
  renderMessages(chatSetup(Tokenizer.fromDir(defaultTokenizerDir())), demos[0], { tools, addGenerationPrompt: false }),
);
