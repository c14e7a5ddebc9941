/**
 * A tiny flag parser over node:util's parseArgs. Each flag carries the one-line description that
 * `agent-r1 CMD --help` prints; every mistake in the command line itself is a UsageError (exit 2)
 * naming the flag.
 */
import { parseArgs } from "node:util";
import { UsageError } from "../util/errors.js";

interface FlagCommon {
  /** One line for --help: what the flag does, in a few words. */
  description: string;
  short?: string;
}

/** A flag with a value: `--out DIR`. */
export interface ValueFlag extends FlagCommon {
  type: "string";
  /** The value's placeholder in --help: `DIR`, `N`, `tiny|small|medium`. */
  value: string;
  /** Repeatable: the values are collected in a list. */
  multiple?: boolean;
  /** Filled in by the parser when the flag is absent. */
  default?: string;
  /** A default the command applies itself (the parser leaves the flag unset), shown in --help. */
  fallback?: string | number;
}

/** A switch: `--force`. */
export interface SwitchFlag extends FlagCommon {
  type: "boolean";
  default?: boolean;
}

export type FlagDef = ValueFlag | SwitchFlag;

export type FlagSpec = Record<string, FlagDef>;

export interface Parsed {
  flags: Record<string, string | boolean | string[] | undefined>;
  positionals: string[];
}

/** The hint of usage errors whose message does not already name the allowed values. */
export const helpHint = (command: string) => `run 'agent-r1 ${command} --help'`;

/** A mistake in the command line of `command`. */
export function usageError(command: string, message: string, hint?: string): UsageError {
  return new UsageError(`${command}: ${message}`, hint);
}

export function parseFlags(command: string, argv: string[], spec: FlagSpec): Parsed {
  // parseArgs takes only its own keys, each defined.
  const options = Object.fromEntries(
    Object.entries(spec).map(([name, f]) => {
      const multiple = f.type === "string" ? f.multiple : undefined;
      return [
        name,
        {
          type: f.type,
          ...(f.short !== undefined && { short: f.short }),
          ...(multiple !== undefined && { multiple }),
          ...(f.default !== undefined && { default: f.default }),
        },
      ];
    }),
  );
  try {
    const { values, positionals } = parseArgs({ args: argv, options, allowPositionals: true, strict: true });
    return { flags: values as Parsed["flags"], positionals };
  } catch (e) {
    const err = e as Error & { code?: string };
    if (!err.code?.startsWith("ERR_PARSE_ARGS_")) throw e; // a bad spec is a bug, not the user's mistake
    const unknown = err.code === "ERR_PARSE_ARGS_UNKNOWN_OPTION" ? /'(-[^']*)'/.exec(err.message)?.[1] : undefined;
    throw usageError(command, unknown ? `unknown flag '${unknown}'` : err.message.split("\n")[0], helpHint(command));
  }
}

/** The command takes no positional arguments. */
export function noPositionals(command: string, positionals: string[], hint = helpHint(command)): void {
  if (positionals.length > 0) throw usageError(command, `unexpected argument '${positionals[0]}'`, hint);
}

export function requireString(command: string, flags: Parsed["flags"], name: string): string {
  const v = flags[name];
  if (typeof v !== "string" || v.length === 0) throw usageError(command, `--${name} is required`, helpHint(command));
  return v;
}

export function optionalNumber(command: string, flags: Parsed["flags"], name: string): number | undefined {
  const v = flags[name];
  if (v === undefined) return undefined;
  const n = Number(v);
  if (typeof v !== "string" || v.trim() === "" || !Number.isFinite(n))
    throw usageError(command, `--${name} must be a number, got '${v}'`);
  return n;
}

/** A whole-number flag of at least `min`, or undefined when absent. */
export function optionalInt(command: string, flags: Parsed["flags"], name: string, min: number): number | undefined {
  const n = optionalNumber(command, flags, name);
  if (n !== undefined && !(Number.isSafeInteger(n) && n >= min))
    throw usageError(command, `--${name} must be a whole number >= ${min}, got ${n}`);
  return n;
}

/** One line per flag: `--name VALUE  description (default: X)`, the descriptions aligned. */
export function flagLines(spec: FlagSpec): string[] {
  const heads = Object.entries(spec).map(
    ([name, f]) => `${f.short ? `-${f.short}, ` : ""}--${name}${f.type === "string" ? ` ${f.value}` : ""}`,
  );
  const width = Math.max(...heads.map((h) => h.length));
  return Object.values(spec).map((f, i) => {
    // a switch's default is always off
    const shown = f.type === "string" ? (f.default ?? f.fallback) : undefined;
    const notes = [
      f.type === "string" && f.multiple ? "repeatable" : "",
      shown !== undefined ? `default: ${shown}` : "",
    ].filter(Boolean);
    return `  ${heads[i].padEnd(width)}  ${f.description}${notes.length ? ` (${notes.join("; ")})` : ""}`;
  });
}
