/**
 * Regenerates what the docs take from the code: docs/reference.md (commands, recipe keys, presets,
 * environment variables) and the README's example blocks (from the example files).
 *   node --import tsx scripts/update-readme.ts
 */
import { readFileSync, writeFileSync } from "node:fs";
import { COMMANDS } from "../src/cli/main.js";
import { referenceDoc } from "../src/cli/reference.js";
import { refreshReadmeExamples } from "../src/train/readme-examples.js";

const root = new URL("../", import.meta.url);

function update(path: string, next: (text: string) => string): void {
  const file = new URL(path, root);
  let text = "";
  try {
    text = readFileSync(file, "utf8");
  } catch {
    /* a new file */
  }
  const out = next(text);
  writeFileSync(file, out);
  console.log(`${path}: ${out === text ? "already up to date" : "updated"}`);
}

update("docs/reference.md", () => referenceDoc(COMMANDS));
update("README.md", (text) => refreshReadmeExamples(text, (path) => readFileSync(new URL(path, root), "utf8")));
