/**
 * A module of the user's that a recipe names (`task.module: ./my-agent.ts`): loaded (a `.ts`
 * module with tsx when it is installed; `.js` and `.mjs` as they are), with its rows read from
 *   rows: Row[] | { train: Row[]; val?: Row[]; test?: Row[] }
 *   data: "rows.jsonl" | { train, val?, test? }   (Agent-R1 rows in JSONL or parquet, relative to the module)
 * What else it exports says how its episodes are played: ./module-task.ts.
 */
import { existsSync } from "node:fs";
import { dirname, extname, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { readTaskRowsFile } from "../data/task-rows-file.js";
import { InputError } from "../util/errors.js";
import type { Split, TaskRow } from "./types.js";

/** What a task module may export (read by shape: anything may be there). */
export interface UserModule {
  agent?: unknown;
  tools?: unknown;
  makeEnv?: unknown;
  rows?: unknown;
  data?: unknown;
  reward?: unknown;
  system?: unknown;
  prompt?: unknown;
  format?: unknown;
  answerPattern?: unknown;
}

export interface LoadedModule {
  mod: UserModule;
  /** "task.module PATH", for messages. */
  where: string;
  /** The module's directory (where `data` paths are taken from). */
  dir: string;
}

async function importModule(path: string): Promise<UserModule> {
  const url = pathToFileURL(path).href;
  if (extname(path) === ".ts" || extname(path) === ".mts") {
    let tsImport: (specifier: string, parent: string) => Promise<unknown>;
    try {
      ({ tsImport } = (await import("tsx/esm/api")) as { tsImport: typeof tsImport });
    } catch {
      throw new InputError(
        `task.module ${path}: a TypeScript module needs tsx to load`,
        "npm install --save-dev tsx, or point task.module at the compiled .js",
      );
    }
    return (await tsImport(url, import.meta.url)) as UserModule;
  }
  return (await import(url)) as UserModule;
}

/** Imports the module a recipe names; a module that throws while loading is one line naming it. */
export async function loadUserModule(modulePath: string): Promise<LoadedModule> {
  const path = resolve(modulePath);
  const where = `task.module ${modulePath}`;
  if (!existsSync(path)) throw new InputError(`${where}: file not found`);
  try {
    return { mod: await importModule(path), where, dir: dirname(path) };
  } catch (e) {
    if (e instanceof InputError) throw e;
    throw new InputError(`${where}: the module failed to load: ${(e as Error).message.split("\n")[0]}`);
  }
}

/** The names a module exports, for messages ("it exports rows, reward"). */
export function exportNames(mod: UserModule): string {
  const names = Object.keys(mod).filter((k) => k !== "default");
  return names.length ? names.join(", ") : "nothing";
}

const SPLITS: Split[] = ["train", "val", "test"];

/** The module's rows per split, from `rows` or `data`; no training rows is an error. */
export async function moduleRows({ mod, where, dir }: LoadedModule): Promise<Record<Split, TaskRow[]>> {
  const out: Record<Split, TaskRow[]> = { train: [], val: [], test: [] };
  const asRows = (x: unknown, what: string): TaskRow[] => {
    if (!Array.isArray(x) || !x.every((r) => r !== null && typeof r === "object"))
      throw new InputError(`${where}: ${what} must be a list of row objects`);
    return x as TaskRow[];
  };
  if (mod.rows !== undefined) {
    if (Array.isArray(mod.rows)) out.train = asRows(mod.rows, "rows");
    else if (mod.rows && typeof mod.rows === "object")
      for (const s of SPLITS) {
        const r = (mod.rows as Record<string, unknown>)[s];
        if (r !== undefined) out[s] = asRows(r, `rows.${s}`);
      }
    else throw new InputError(`${where}: rows must be a list, or { train, val?, test? }`);
  } else if (mod.data !== undefined) {
    if (typeof mod.data !== "string" && (mod.data === null || typeof mod.data !== "object"))
      throw new InputError(`${where}: data must be a file path, or { train, val?, test? } of paths`);
    const files: Partial<Record<Split, unknown>> =
      typeof mod.data === "string" ? { train: mod.data } : (mod.data as object);
    for (const s of SPLITS) {
      const f = files[s];
      if (f === undefined) continue;
      if (typeof f !== "string") throw new InputError(`${where}: data.${s} must be a file path`);
      out[s] = (await readTaskRowsFile(resolve(dir, f))).rows;
    }
  } else
    throw new InputError(`${where}: export rows (a list, or { train, val, test }) or data (a JSONL or parquet path)`);
  if (out.train.length === 0) throw new InputError(`${where}: no training rows`);
  return out;
}
