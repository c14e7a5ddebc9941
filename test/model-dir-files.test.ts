/**
 * A model whose chat template lives in chat_template.jinja (as newer releases
 * ship it, with none in tokenizer_config.json) keeps that file through every
 * way a model directory is written back: an engine save, a training
 * checkpoint, and `agent-r1 export`; the reloaded tokenizer renders with it.
 */
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { initModel } from "../src/model/init-model.js";
import { Tokenizer } from "../src/model/tokenizer.js";
import { renderChat } from "../src/model/chat.js";
import { LocalEngine } from "../src/engine/local/local-engine.js";
import { parseConfig } from "../src/train/load-config.js";
import { Trainer } from "../src/train/trainer.js";
import { runCli } from "../src/cli/main.js";
import { toyTask } from "./fixtures/toy-task.js";
import { toyEngines } from "./fixtures/train-toy.js";
import { captureIO, tempDir } from "./helpers.js";

let root: string;
let model: string;
let jinja: string;

before(async () => {
  root = tempDir("agent-r1-model-files-");
  model = join(root, "model");
  await initModel({ preset: "tiny", out: model, seed: 0 });
  // Move the template out of tokenizer_config.json into its own file, with a system line of its own to tell it apart.
  const configPath = join(model, "tokenizer_config.json");
  const { chat_template, ...config } = JSON.parse(readFileSync(configPath, "utf8")) as { chat_template: string };
  jinja = chat_template.replace("You are a helpful assistant.", "You read chat_template.jinja.");
  assert.notEqual(jinja, chat_template);
  writeFileSync(configPath, JSON.stringify(config, null, 2) + "\n");
  writeFileSync(join(model, "chat_template.jinja"), jinja);
});

after(() => rmSync(root, { recursive: true, force: true }));

/** The directory holds the same chat_template.jinja, no template in tokenizer_config.json, and its tokenizer renders with it. */
function assertKeepsTemplate(dir: string): void {
  assert.equal(readFileSync(join(dir, "chat_template.jinja"), "utf8"), jinja, dir);
  const config = JSON.parse(readFileSync(join(dir, "tokenizer_config.json"), "utf8")) as Record<string, unknown>;
  assert.equal(config.chat_template, undefined);
  const tokenizer = Tokenizer.fromDir(dir);
  assert.equal(tokenizer.chatTemplate, jinja);
  assert.equal(
    renderChat(tokenizer, [{ role: "user", content: "hi" }]),
    "<|im_start|>system\nYou read chat_template.jinja.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n",
  );
}

test("the source model renders with its chat_template.jinja", () => {
  assertKeepsTemplate(model);
});

test("an engine save keeps chat_template.jinja", async () => {
  const engine = await LocalEngine.load(model, { workers: 0 });
  try {
    const saved = join(root, "saved");
    await engine.save(saved);
    assertKeepsTemplate(saved);
  } finally {
    await engine.dispose();
  }
});

test("a training checkpoint and its export keep chat_template.jinja", async () => {
  const out = join(root, "run");
  const cfg = parseConfig({
    model: { path: model },
    engine: { workers: 0 },
    rollout: { n: 2, maxTurns: 1, maxTokensPerTurn: 4, maxTotalTokens: 256 },
    train: { iterations: 1, batchSize: 1, checkpointEvery: 1, keepCheckpoints: 1, valEvery: 0, samplesPerIteration: 1 },
  });
  const t = await Trainer.open(cfg, { out, task: toyTask(2), engines: toyEngines() });
  await t.run();
  await t.close();
  const checkpoint = join(out, "checkpoints", "step-1");
  assert.ok(existsSync(join(checkpoint, "policy", "model.safetensors")));
  assertKeepsTemplate(join(checkpoint, "policy"));

  const exported = join(root, "exported");
  const io = captureIO();
  assert.equal(await runCli(["export", "--checkpoint", checkpoint, "--out", exported], io), 0, io.stderr.join("\n"));
  assertKeepsTemplate(exported);
});
