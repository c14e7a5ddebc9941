/** Warm start: SFT datums equal a scripted rollout's; SFT lowers the loss; the task tokenizer keeps the shipped special tokens. */
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { trajectoryDatums } from "../src/rl/datums.js";
import { LocalEngine } from "../src/engine/local/local-engine.js";
import { initModel } from "../src/model/init-model.js";
import { defaultTokenizerDir } from "../src/model/default-tokenizer.js";
import { Tokenizer } from "../src/model/tokenizer.js";
import { createMultihopTask } from "../src/tasks/multihop/index.js";
import { meanCrossEntropy, sftDatums, trainSft } from "../src/train/sft.js";
import { buildTaskTokenizer } from "../src/train/task-tokenizer.js";
import { COMPACT_CHAT_TEMPLATE } from "../src/model/chat-template.js";
import { chatmlTokenizer } from "../src/testing/index.js";
import { replayRollout } from "./task-helpers.js";
import { tempDir } from "./helpers.js";

const task = createMultihopTask({ train: 18, val: 9, test: 9 });

test("SFT datums are the datums of a scripted rollout of the same demonstrations", async () => {
  const rows = task.rows("train").slice(0, 6);
  const opts = { seed: 3, quality: 0.5 };
  const demos = task.demonstrations(rows, opts);
  const res = await replayRollout(task, rows, demos);
  assert.equal(res.trajectories.length, rows.length);
  const sft = sftDatums(task, rows, chatmlTokenizer(), opts);
  const eos = chatmlTokenizer().eosTokenId;
  for (const [i, t] of res.trajectories.entries()) {
    const actions = t.steps.reduce((s, st) => s + st.action.length, 0);
    const [played] = trajectoryDatums(t).datums;
    assert.deepEqual(sft[i].tokens, played.tokens, `demo ${i}: tokens`);
    assert.deepEqual(sft[i].targetTokens, played.targetTokens, `demo ${i}: targets`);
    assert.deepEqual(sft[i].weights, played.weights, `demo ${i}: weights`);
    // Weight 1 exactly on the assistant's tokens: their count, each turn closed by the end-of-turn token.
    assert.equal(
      sft[i].weights.reduce((a, b) => a + b, 0),
      actions,
    );
    const turns = demos[i].filter((m) => m.role === "assistant").length;
    assert.equal(sft[i].targetTokens.filter((tok, k) => tok === eos && sft[i].weights[k] === 1).length, turns);
    // System, user, and one tool-response turn after each assistant turn but the last: weight 0.
    assert.equal(sft[i].targetTokens.filter((tok, k) => tok === eos && sft[i].weights[k] === 0).length, 2 + turns - 1);
  }
});

test("a few SFT steps lower the cross-entropy on the demonstrations", async () => {
  const dir = join(tempDir(), "tiny");
  await initModel({ preset: "tiny", out: dir, seed: 1 });
  const engine = await LocalEngine.load(dir, { workers: 0 });
  try {
    const datums = sftDatums(task, task.rows("train").slice(0, 2), engine.tokenizer, { seed: 0, quality: 1 });
    const before = await meanCrossEntropy(engine, datums);
    const steps: number[] = [];
    await trainSft(engine, datums, {
      steps: 4,
      batchSize: 2,
      lr: 1e-2,
      warmupSteps: 0,
      onStep: (s) => steps.push(s.step),
    });
    const after = await meanCrossEntropy(engine, datums);
    assert.deepEqual(steps, [1, 2, 3, 4]);
    assert.ok(after < before - 0.5, `cross-entropy ${before} → ${after}`);
  } finally {
    await engine.dispose();
  }
});

test("sft rejects an empty demonstration list and bad step counts", async () => {
  const fake = {} as LocalEngine;
  await assert.rejects(trainSft(fake, [], { steps: 1, batchSize: 1, lr: 1 }), /no demonstrations/);
  await assert.rejects(
    trainSft(fake, [{ tokens: [1], targetTokens: [2], weights: [1] }], { steps: 0, batchSize: 1, lr: 1 }),
    /steps must be a positive integer/,
  );
});

test("task tokenizer: standard files, the shipped special tokens and chat template, shorter episodes", async () => {
  const out = join(tempDir(), "tok");
  const res = await buildTaskTokenizer(task, { vocabSize: 600, out, minFrequency: 2 });
  for (const f of ["tokenizer.json", "tokenizer_config.json"]) assert.ok(existsSync(join(out, f)), f);
  const tok = Tokenizer.fromDir(out),
    shipped = Tokenizer.fromDir(defaultTokenizerDir());
  assert.equal(res.vocabSize, tok.vocabSize);
  assert.ok(tok.vocabSize <= 600);
  const specials = (dir: string) =>
    (
      JSON.parse(readFileSync(join(dir, "tokenizer.json"), "utf8")).added_tokens as {
        content: string;
        special: boolean;
      }[]
    ).map((t) => [t.content, t.special]);
  assert.deepEqual(specials(out), specials(defaultTokenizerDir()));
  assert.equal(tok.chatTemplate, COMPACT_CHAT_TEMPLATE, "task models list their tools compactly");
  assert.equal(tok.eosToken, "<|im_end|>");
  // "words" split: a name gets the same tokens after a space, after a quote and at a line start
  const name = task.questions.test[0].searches[0];
  const alone = tok.encode(name);
  for (const [before, after] of [
    ["Where is ", "?"],
    ['{"query": "', '"}'],
    ["", " is a"],
    ["x\n", "."],
  ]) {
    const ids = tok.encode(before + name + after);
    const at = ids.findIndex((_, i) => alone.every((t, j) => ids[i + j] === t));
    assert.ok(at >= 0, `'${name}' keeps its tokens in '${before}${name}${after}'`);
  }
  const doc = task.documents[0].text;
  assert.equal(tok.decode(tok.encode(doc)), doc);
  assert.ok(tok.encode(doc).length < shipped.encode(doc).length, "task text takes fewer tokens");
  await assert.rejects(buildTaskTokenizer(task, { vocabSize: 100, out }), /--vocab must be an integer of at least 267/);
});
