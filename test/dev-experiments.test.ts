/**
 * The experiment scripts behind figures in the docs live in dev/experiments/: type-checked with
 * the rest (tsconfig includes dev/), with no machine's paths as defaults (what a run writes or
 * reads is an argument, and a missing one prints the usage line), and every one the README or
 * docs/ names exists.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { repoRoot } from "./repo-root.js";

const root = repoRoot();
const experiments = join(root, "dev", "experiments");
const scripts = readdirSync(experiments).filter((f) => f.endsWith(".ts"));
/** Modules the scripts import, not scripts themselves. */
const HELPERS = ["usage.ts", "fused-common.ts"];

test("tsconfig type-checks dev/ (npm test runs tsc over it)", () => {
  const tsconfig = JSON.parse(readFileSync(join(root, "tsconfig.json"), "utf8")) as { include: string[] };
  assert.ok(tsconfig.include.includes("dev/**/*.ts"));
  assert.ok(!existsSync(join(root, "scripts", "experiments")), "the experiments moved to dev/experiments");
});

test("no experiment has a machine's path as a default; each script states its usage", () => {
  for (const f of [...scripts, "sgemm-peak.c"]) {
    const text = readFileSync(join(experiments, f), "utf8");
    // An absolute path or a run directory in a string literal is a default someone else's machine lacks.
    const found = /["'`](\/(?:tmp|home|work|Users|root|mnt|var|opt)\b[^"'`]*|runs\/[^"'`]*)["'`]/.exec(text);
    assert.equal(found?.[1], undefined, `${f} defaults to ${found?.[1]}`);
    assert.doesNotMatch(
      text,
      /\b(issue \d+|stage \d+|session)\b/i,
      `${f}: comments say what the script measures, not when it was written`,
    );
  }
  for (const f of scripts.filter((s) => !HELPERS.includes(s))) {
    const text = readFileSync(join(experiments, f), "utf8");
    assert.match(
      text,
      new RegExp(`const USAGE =\\s*"[^"]*node --import tsx dev/experiments/${f.replace(".", "\\.")}`),
      `${f}: a usage line`,
    );
    assert.match(text, /required\(/, `${f}: required arguments go through usage.ts`);
  }
});

test("every dev/, scripts/ and examples/ file the README and docs/ name exists", () => {
  const docs = [
    "README.md",
    ...readdirSync(join(root, "docs"))
      .filter((f) => f.endsWith(".md"))
      .map((f) => `docs/${f}`),
  ];
  let named = 0;
  for (const doc of docs) {
    for (const m of readFileSync(join(root, doc), "utf8").matchAll(
      /\b((?:dev|scripts|examples)\/[\w./-]+\.(?:ts|js|c))\b/g,
    )) {
      named++;
      assert.ok(existsSync(join(root, m[1])), `${doc} names ${m[1]}, which is not in the repository`);
    }
  }
  assert.ok(named > 0);
});

test("an experiment run without its arguments prints the usage line and exits 2", async () => {
  const js = fileURLToPath(new URL("../dev/experiments/split-em.js", import.meta.url));
  const file = existsSync(js) ? js : js.replace(/\.js$/, ".ts");
  const child = spawn(process.execPath, [...process.execArgv, file], { stdio: ["ignore", "pipe", "pipe"] });
  let err = "";
  child.stderr.on("data", (d) => (err += d));
  const code = await new Promise<number | null>((r) => child.on("exit", r));
  assert.equal(code, 2);
  assert.equal(
    err,
    "missing MODEL_DIR\nusage: node --import tsx dev/experiments/split-em.ts MODEL_DIR [split: train] [N: 64] [train size: 8192]\n",
  );
});
