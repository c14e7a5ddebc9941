import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdirSync, readdirSync, writeFileSync, appendFileSync } from "node:fs";
import { join } from "node:path";
import { latestCheckpoint, listCheckpoints, writeCheckpoint } from "../src/train/checkpoint.js";
import { tempDir } from "./helpers.js";

const fill = (text: string) => async (dir: string) => {
  mkdirSync(join(dir, "policy"));
  writeFileSync(join(dir, "policy", "weights.bin"), text);
};

test("checkpoints are renamed into place, keep the last K, and verify", async () => {
  const run = tempDir();
  for (let step = 1; step <= 4; step++) await writeCheckpoint(run, step, { iteration: step }, fill(`w${step}`), 2);
  assert.deepEqual(listCheckpoints(run), [4, 3]);
  assert.deepEqual(
    readdirSync(join(run, "checkpoints")).filter((n) => n.startsWith(".tmp")),
    [],
  );
  const found = latestCheckpoint<{ iteration: number }>(run)!;
  assert.equal(found.step, 4);
  assert.equal(found.state.iteration, 4);
  assert.deepEqual(found.skipped, []);
});

test("a damaged or unfinished newest checkpoint falls back to the previous one", async () => {
  const run = tempDir();
  await writeCheckpoint(run, 1, { iteration: 1 }, fill("a"), 3);
  await writeCheckpoint(run, 2, { iteration: 2 }, fill("b"), 3);
  appendFileSync(join(run, "checkpoints", "step-2", "policy", "weights.bin"), "x");
  // A failed write leaves no step directory behind.
  await assert.rejects(
    writeCheckpoint(
      run,
      3,
      { iteration: 3 },
      async () => {
        throw new Error("disk full");
      },
      3,
    ),
    /disk full/,
  );
  assert.ok(!existsSync(join(run, "checkpoints", "step-3")));
  const found = latestCheckpoint<{ iteration: number }>(run)!;
  assert.equal(found.step, 1);
  assert.deepEqual(found.skipped, [{ step: 2, reason: "policy/weights.bin does not match its checksum" }]);
  assert.equal(latestCheckpoint(tempDir()), undefined);
});
