/** A tiny flag parser over node:util's parseArgs, with errors that name the flag. */
import { parseArgs } from "node:util";
import { InputError } from "../util/errors.js";

export type FlagSpec = Record<string, { type: "string" | "boolean"; short?: string; multiple?: boolean; default?: string | boolean }>;

export interface Parsed {
  flags: Record<string, string | boolean | string[] | undefined>;
  positionals: string[];
}

export function parseFlags(command: string, argv: string[], spec: FlagSpec): Parsed {
  try {
    const { values, positionals } = parseArgs({ args: argv, options: spec, allowPositionals: true, strict: true });
    return { flags: values as Parsed["flags"], positionals };
  } catch (e) {
    throw new InputError(`${command}: ${(e as Error).message.split("\n")[0]}`, `run 'agent-r1 ${command} --help'`);
  }
}

export function requireString(command: string, flags: Parsed["flags"], name: string): string {
  const v = flags[name];
  if (typeof v !== "string" || v.length === 0) throw new InputError(`${command}: --${name} is required`, `run 'agent-r1 ${command} --help'`);
  return v;
}

export function optionalNumber(command: string, flags: Parsed["flags"], name: string): number | undefined {
  const v = flags[name];
  if (v === undefined) return undefined;
  const n = Number(v);
  if (typeof v !== "string" || v.trim() === "" || !Number.isFinite(n)) throw new InputError(`${command}: --${name} must be a number, got '${v}'`);
  return n;
}
