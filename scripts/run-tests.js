#!/usr/bin/env node
/**
 * Runs the test suite (`node --test` with the arguments given, by default every compiled test) with
 * its own temporary directory: TMPDIR points into a fresh folder for the run and every process the
 * tests start, and the folder is removed at the end, whatever the outcome. Tests make model
 * directories, checkpoints and servers' state under os.tmpdir(); before this, a run left about 170
 * of them behind (1.3 GB), which filled a CI machine's disk over many runs. The line at the end
 * says how much the run left, so a test that stops cleaning up shows.
 *
 *   node scripts/run-tests.js [node --test arguments...]   (default: --test-concurrency=2 dist/test/)
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const args = process.argv.slice(2);
const root = mkdtempSync(join(tmpdir(), "agent-r1-tests-"));

/** Bytes under a path (files only; links not followed). */
function size(path) {
  const s = statSync(path, { throwIfNoEntry: false });
  if (!s || s.isSymbolicLink()) return 0;
  if (!s.isDirectory()) return s.size;
  let total = 0;
  for (const name of readdirSync(path)) total += size(join(path, name));
  return total;
}

let status = 1;
try {
  const run = spawnSync(
    process.execPath,
    ["--test", ...(args.length > 0 ? args : ["--test-concurrency=2", "dist/test/"])],
    { stdio: "inherit", env: { ...process.env, TMPDIR: root } },
  );
  status = run.status ?? 1;
  const left = readdirSync(root).length;
  const mb = (size(root) / 1e6).toFixed(0);
  console.log(`run-tests: the tests left ${left} entries (${mb} MB) in their temporary directory; removed`);
} finally {
  rmSync(root, { recursive: true, force: true });
}
process.exit(status);
