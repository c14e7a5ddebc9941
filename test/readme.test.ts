import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { readmeExamples } from "../src/train/readme-examples.js";

function readmeText(): string {
  for (const p of [
    fileURLToPath(new URL("../README.md", import.meta.url)),
    fileURLToPath(new URL("../../README.md", import.meta.url)),
  ]) {
    try {
      return readFileSync(p, "utf8");
    } catch {
      /* try the next location (tests run from dist/test or test/) */
    }
  }
  throw new Error("README.md not found");
}

test("the README is a short guide: under 275 lines, with the two commands, the datum's path and the file map", () => {
  const text = readmeText();
  assert.ok(text.split("\n").length < 275, `${text.split("\n").length} lines`);
  for (const heading of ["## The main job", "## One datum's path", "## Writing a tool and an env", "## File map"])
    assert.ok(text.includes(heading), heading);
  assert.ok(text.includes("npm install && npm start") && text.includes("npm install && npm test"));
});

test("the README's example blocks equal the example files the suite compiles and runs", () => {
  const blocks = readmeExamples(readmeText());
  assert.ok(blocks.length >= 2, "the README shows a tool and an agent");
  for (const b of blocks) {
    let file: string | undefined;
    for (const base of ["../", "../../"]) {
      try {
        file = readFileSync(fileURLToPath(new URL(base + b.path, import.meta.url)), "utf8");
        break;
      } catch {
        /* next location */
      }
    }
    assert.ok(file !== undefined, `${b.path} not found`);
    assert.equal(b.code, file, `README block of ${b.path} differs: run node --import tsx scripts/update-readme.ts`);
  }
});
