/**
 * Keys that reach an object's prototype when assigned (`obj["__proto__"] = v` replaces the
 * prototype; `obj.constructor.prototype` is shared by every object). Paths built from user
 * input (`key.path=value` overrides, `--option name=value`, recipe files) refuse them before
 * any assignment, so a bad override can never change `Object.prototype`.
 */
import { InputError } from "./errors.js";

const FORBIDDEN = new Set(["__proto__", "constructor", "prototype"]);

export function isForbiddenKey(key: string): boolean {
  return FORBIDDEN.has(key);
}

/** Throws an InputError naming `where` when `key` is one of the prototype keys. */
export function checkKey(key: string, where: string): void {
  if (FORBIDDEN.has(key))
    throw new InputError(`${where}: the key '${key}' is not allowed (it would reach the object's prototype)`);
}

/** The dotted path of the first prototype key anywhere in a parsed document (own keys only), or undefined. */
export function findForbiddenKey(value: unknown, path: string[] = [], seen = new Set<unknown>()): string | undefined {
  if (value === null || typeof value !== "object" || seen.has(value)) return undefined;
  seen.add(value);
  for (const key of Object.keys(value)) {
    if (FORBIDDEN.has(key)) return [...path, key].join(".");
    const found = findForbiddenKey((value as Record<string, unknown>)[key], [...path, key], seen);
    if (found) return found;
  }
  return undefined;
}
