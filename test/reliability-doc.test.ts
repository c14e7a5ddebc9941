/**
 * docs/reliability.md's table of probes names, for each probe, the tests that hold it
 * (`suite: test name`, suite = test/SUITE.test.ts). This keeps the table and the tests equal:
 * every test named exists (a title written with `${...}` matches whatever it expands to).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("../", import.meta.url)).replace(/dist\/$/, "");

/** The titles of a test file's tests, as patterns. */
function titles(file: string): RegExp[] {
  const text = readFileSync(file, "utf8");
  const out: RegExp[] = [];
  for (const m of text.matchAll(/^\s*test\(\s*(?:"((?:[^"\\]|\\.)*)"|`((?:[^`\\]|\\.)*)`)/gm)) {
    if (m[1] !== undefined) out.push(new RegExp(`^${escape(JSON.parse(`"${m[1]}"`) as string)}$`));
    else
      out.push(
        new RegExp(
          `^${m[2]
            .split(/\$\{[^}]*\}/)
            .map(escape)
            .join(".+")}$`,
        ),
      );
  }
  return out;
}

const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

test("every test the reliability table names exists in its suite", () => {
  const doc = readFileSync(`${root}docs/reliability.md`, "utf8");
  const table = doc.slice(doc.indexOf("<!-- probes:start -->"), doc.indexOf("<!-- probes:end -->"));
  const rows = table.split("\n").filter((l) => l.startsWith("| ") && !l.startsWith("| class") && !l.startsWith("|---"));
  assert.ok(rows.length >= 40, `${rows.length} probes in the table`);
  let cited = 0;
  for (const row of rows) {
    const cells = row.split(" | ");
    const last = cells[cells.length - 1].replace(/ \|$/, "").replace(/\\\|/g, "|"); // a table cell escapes |
    for (const ref of last.split(/; (?=[a-z-]+: )/)) {
      const m = /^([a-z-]+): (.+)$/.exec(ref);
      assert.ok(m, `a test cell should read 'suite: name': ${ref}`);
      const file = `${root}test/${m[1]}.test.ts`;
      assert.ok(existsSync(file), `no suite ${file}`);
      assert.ok(
        titles(file).some((t) => t.test(m[2])),
        `${m[1]}: no test named "${m[2]}"`,
      );
      cited++;
    }
  }
  assert.ok(cited >= rows.length);
});
