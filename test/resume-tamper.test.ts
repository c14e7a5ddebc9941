/**
 * Resume trusts nothing it reads back (docs/reliability.md, "Resume"): each way of tampering
 * with the newest checkpoint (its state.json, its manifest, files the manifest does not list,
 * links, FIFOs, paths that leave the checkpoint) makes that checkpoint unusable, named in the
 * log, and the previous one is used; with none usable, resume fails with one line and changes
 * nothing. Manifest checksums are recomputed after each edit, so only the new checks can catch it.
 */
import { test, before } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { cpSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { runCli } from "../src/cli/main.js";
import { scanCheckpoints } from "../src/train/checkpoint.js";
import { parseTrainState, Trainer, type TrainState } from "../src/train/trainer.js";
import { toyConfig, toyEngines } from "./fixtures/train-toy.js";
import { toyTask } from "./fixtures/toy-task.js";
import { snapshot } from "./fixtures/snapshot.js";
import { captureIO, tempDir } from "./helpers.js";

let pristine: string;

before(async () => {
  // Three iterations, two checkpoints kept: step-3 (tampered below) and step-2 (the fallback).
  pristine = tempDir();
  const t = await Trainer.open(toyConfig(3), { out: pristine, task: toyTask(), engines: toyEngines() });
  await t.run();
  await t.close();
});

const sha = (bytes: Buffer | string) => createHash("sha256").update(bytes).digest("hex");

/** A copy of the finished run whose step-3 was changed by `tamper` (which may edit the manifest's file list). */
function tampered(tamper: (step3: string, files: Record<string, string>) => void): string {
  const out = tempDir();
  cpSync(pristine, out, { recursive: true });
  const dir = join(out, "checkpoints", "step-3");
  const manifest = JSON.parse(readFileSync(join(dir, "manifest.json"), "utf8")) as {
    step: number;
    files: Record<string, string>;
  };
  tamper(dir, manifest.files);
  writeFileSync(join(dir, "manifest.json"), JSON.stringify(manifest));
  return out;
}

/** Rewrites state.json and its checksum, as a careful tamperer would. */
const withState = (state: unknown) => (dir: string, files: Record<string, string>) => {
  const text = JSON.stringify(state);
  writeFileSync(join(dir, "state.json"), text);
  files["state.json"] = sha(text);
};

const cases: [string, (dir: string, files: Record<string, string>) => void, RegExp][] = [
  [
    "state.json with iteration -1",
    withState({ iteration: -1, cursor: { epoch: 0, position: 6 }, optimizerSteps: 3 }),
    /state\.json: iteration: Too small/,
  ],
  ["state.json that is null", withState(null), /state\.json: \(top\): .*expected object, received null/],
  [
    "state.json for another iteration",
    withState({ iteration: 2, cursor: { epoch: 0, position: 4 }, optimizerSteps: 2 }),
    /state\.json: iteration 2 is not the checkpoint's step 3/,
  ],
  [
    "state.json with an unknown field",
    withState({ iteration: 3, cursor: { epoch: 0, position: 6 }, optimizerSteps: 3, extra: 1 }),
    /state\.json: \(top\): Unrecognized key/,
  ],
  [
    "a manifest that lists a directory",
    (dir, files) => {
      files["policy"] = sha("x");
    },
    /policy is not a regular file/,
  ],
  [
    "a manifest path that leaves the checkpoint",
    (dir, files) => {
      writeFileSync(join(dir, "..", "outside.txt"), "secret");
      files["../outside.txt"] = sha("secret");
    },
    /manifest\.json lists '\.\.\/outside\.txt', which is not a plain relative path inside the checkpoint/,
  ],
  [
    "an absolute manifest path",
    (dir, files) => {
      files["/etc/hostname"] = sha("x");
    },
    /lists '\/etc\/hostname', which is not a plain relative path/,
  ],
  [
    "a file the manifest does not list",
    (dir) => writeFileSync(join(dir, "policy", "extra.bin"), "extra"),
    /policy\/extra\.bin is in the checkpoint but not in manifest\.json/,
  ],
  [
    "a FIFO in the checkpoint (listed)",
    (dir, files) => {
      execFileSync("mkfifo", [join(dir, "policy", "pipe")]);
      files["policy/pipe"] = sha("");
    },
    /policy\/pipe is not a regular file/,
  ],
  [
    "a symlink in place of a listed file",
    (dir) => {
      const target = join(dir, "..", "config-copy.json");
      cpSync(join(dir, "policy", "config.json"), target);
      rmSync(join(dir, "policy", "config.json"));
      symlinkSync(target, join(dir, "policy", "config.json"));
    },
    /policy\/config\.json is not a regular file/,
  ],
  [
    "a manifest with a malformed checksum",
    (dir, files) => {
      files["state.json"] = "abc";
    },
    /manifest\.json: files\.state\.json: expected a SHA-256 hex digest/,
  ],
  [
    "trainer_state.json of the policy that is not a step count",
    (dir, files) => {
      const text = JSON.stringify({ step: "many" });
      writeFileSync(join(dir, "policy", "trainer_state.json"), text);
      files["policy/trainer_state.json"] = sha(text);
    },
    /policy\/trainer_state\.json \(step\): must be a non-negative integer/,
  ],
];

for (const [what, tamper, reason] of cases) {
  test(`resume with ${what}: step-3 is unusable, named in the log, and the run resumes from step-2`, async () => {
    const out = tampered(tamper);
    const logs: string[] = [];
    const t = await Trainer.open(toyConfig(3), {
      out,
      task: toyTask(),
      engines: toyEngines(),
      resume: true,
      log: (l) => logs.push(l),
    });
    try {
      assert.equal(t.iteration, 2);
      const skip = logs.find((l) => l.startsWith(`skipping checkpoint ${join(out, "checkpoints", "step-3")}: `));
      assert.ok(skip, logs.join("\n"));
      assert.match(skip, reason);
      assert.match(skip, /; resuming from step-2$/);
      // Metric lines after the checkpoint used are dropped, the earlier ones kept (not emptied).
      const lines = readFileSync(join(out, "metrics.jsonl"), "utf8").trim().split("\n");
      assert.deepEqual(
        lines.map((l) => (JSON.parse(l) as { iteration: number }).iteration),
        [1, 2],
      );
    } finally {
      await t.close();
    }
  });
}

test("a checkpoint whose manifest names another step is skipped", () => {
  const out = tempDir();
  cpSync(pristine, out, { recursive: true });
  const path = join(out, "checkpoints", "step-3", "manifest.json");
  const m = JSON.parse(readFileSync(path, "utf8")) as { step: number };
  writeFileSync(path, JSON.stringify({ ...m, step: 7 }));
  const scan = scanCheckpoints<TrainState>(out, parseTrainState);
  assert.equal(scan.found?.step, 2);
  assert.deepEqual(scan.skipped, [{ step: 3, reason: "manifest.json is for step 7, not 3" }]);
});

test("resume with every checkpoint unusable: one line naming each, exit 1, the run directory unchanged", async () => {
  const out = tampered(withState({ iteration: -1, cursor: { epoch: 0, position: 0 }, optimizerSteps: 0 }));
  mkdirSync(join(out, "checkpoints", "step-2", "stray"));
  writeFileSync(join(out, "checkpoints", "step-2", "stray", "file"), "x");
  const saved = snapshot(out);
  const io = captureIO();
  assert.equal(await runCli(["train", "--resume", out], io), 1);
  assert.equal(io.stderr.length, 1, io.stderr.join("\n"));
  assert.match(
    io.stderr[0],
    /no complete checkpoint to resume from \(.*step-3: state\.json: iteration: Too small.*; .*step-2: stray\/file is in the checkpoint but not in manifest\.json\)/,
  );
  assert.deepEqual(snapshot(out), saved);
});
