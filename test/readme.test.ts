import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { configReference } from "../src/train/config-reference.js";

function readmeText(): string {
  for (const p of [fileURLToPath(new URL("../README.md", import.meta.url)), fileURLToPath(new URL("../../README.md", import.meta.url))]) {
    try {
      return readFileSync(p, "utf8");
    } catch {
      /* try the next location (tests run from dist/test or test/) */
    }
  }
  throw new Error("README.md not found");
}

test("the README's configuration reference equals the one generated from the schema", () => {
  const text = readmeText();
  const m = /<!-- config-reference:start -->\n([\s\S]*?)\n<!-- config-reference:end -->/.exec(text);
  assert.ok(m, "markers missing");
  assert.equal(m![1], configReference(), "run: node --import tsx scripts/update-readme.ts");
});
