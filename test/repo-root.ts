/** The repository root (the directory of the package.json named agent-r1), from test/ under tsx or dist/test when compiled. */
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

export function repoRoot(): string {
  for (let dir = dirname(fileURLToPath(import.meta.url)); dir !== dirname(dir); dir = dirname(dir)) {
    const pkg = join(dir, "package.json");
    if (existsSync(pkg) && (JSON.parse(readFileSync(pkg, "utf8")) as { name?: string }).name === "agent-r1") return dir;
  }
  throw new Error("no package.json named agent-r1 above the test directory");
}
