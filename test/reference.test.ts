/** docs/reference.md is generated from the code (src/cli/reference.ts) and stays equal to it. */
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { COMMANDS } from "../src/cli/main.js";
import { referenceDoc } from "../src/cli/reference.js";
import { configReference } from "../src/train/config-reference.js";

const root = fileURLToPath(new URL("../", import.meta.url)).replace(/dist\/$/, "");

test("docs/reference.md equals the reference generated from the commands, the config schema, the presets and the settings", () => {
  const doc = readFileSync(`${root}docs/reference.md`, "utf8");
  assert.equal(doc, referenceDoc(COMMANDS), "run: node --import tsx scripts/update-readme.ts");
  // Every command, every flag and every recipe key is in it.
  for (const c of COMMANDS) {
    assert.ok(doc.includes(`### \`agent-r1 ${c.name}\``), c.name);
    for (const flag of Object.keys(c.flags)) assert.ok(doc.includes(`| \`--${flag}\` |`), `${c.name} --${flag}`);
  }
  assert.ok(doc.includes(configReference()));
});
