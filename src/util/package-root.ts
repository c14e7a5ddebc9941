/**
 * The installed package's root and version, found from this module's own location so they work
 * from src/ under tsx, from dist/src/, and from node_modules/agent-r1 in another project.
 */
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

let cached: { root: string; version: string } | undefined;

/** Nearest ancestor of this module holding agent-r1's package.json (a package.json of another name is skipped). */
function findPackage(): { root: string; version: string } {
  const here = fileURLToPath(import.meta.url);
  for (let dir = dirname(here); ; dir = dirname(dir)) {
    const file = join(dir, "package.json");
    const pkg = existsSync(file) ? readPackage(file) : undefined;
    if (pkg?.name === "agent-r1") return { root: dir, version: String(pkg.version) };
    if (dirname(dir) === dir) throw new Error(`agent-r1's package.json not found above ${here}`);
  }
}

function readPackage(file: string): { name?: string; version?: string } | undefined {
  try {
    return JSON.parse(readFileSync(file, "utf8")) as { name?: string; version?: string };
  } catch {
    return undefined; // not ours; keep looking
  }
}

/** Absolute path of the directory holding package.json, assets/ and recipes/. */
export function packageRoot(): string {
  cached ??= findPackage();
  return cached.root;
}

/** The `version` field of package.json. */
export function packageVersion(): string {
  cached ??= findPackage();
  return cached.version;
}
