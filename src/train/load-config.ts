/**
 * Reading a recipe: YAML file, then `key.path=value` overrides, then the
 * schema. Errors name the key and what is allowed, in one line.
 * A relative `task.module` in the file is resolved against the file's directory (an override's,
 * against the current one), and kept absolute, so the run's saved config.yaml finds the module
 * again from any directory (`train --resume`); so is an MCP server command's `cwd` (task.mcp),
 * which defaults to the recipe's directory.
 */
import { existsSync } from "node:fs";
import { dirname, isAbsolute, resolve } from "node:path";
import { parse as parseYaml } from "yaml";
import { z } from "zod";
import { configSchema, type TrainConfig } from "./config.js";
import { InputError } from "../util/errors.js";
import { checkKey, findForbiddenKey } from "../util/safe-keys.js";
import { readTextInput } from "../util/read-file.js";
import { applyPreset } from "./presets.js";
import { asyncSettingsProblem } from "./async/staleness.js";
import { checkDistill } from "./distill-config.js";
import { advantageEstimator } from "../rl/advantages/index.js";

type Json = Record<string, unknown>;

/** "a.b.c=value" → sets obj.a.b.c; the value is parsed as YAML (numbers, booleans, lists), else kept as a string. */
export function applyOverride(obj: Json, override: string): void {
  const eq = override.indexOf("=");
  if (eq <= 0) throw new InputError(`override '${override}' must look like key.path=value`);
  const path = override.slice(0, eq).split(".");
  if (path.some((p) => p === ""))
    throw new InputError(`override '${override}': empty key in '${override.slice(0, eq)}'`);
  for (const key of path) checkKey(key, `override '${override}'`);
  const raw = override.slice(eq + 1);
  let value: unknown;
  try {
    value = raw === "" ? "" : parseYaml(raw);
  } catch {
    value = raw;
  }
  const nested = findForbiddenKey(value);
  if (nested) checkKey(nested.split(".").pop()!, `override '${override}'`);
  let cur: Json = obj;
  for (const key of path.slice(0, -1)) {
    const next = Object.hasOwn(cur, key) ? cur[key] : undefined;
    if (next === undefined || next === null) cur[key] = {};
    else if (typeof next !== "object" || Array.isArray(next))
      throw new InputError(`override '${override}': '${key}' is not a section`);
    cur = cur[key] as Json;
  }
  cur[path[path.length - 1]] = value;
}

/** The keys a schema object accepts at a path, for error messages. */
function allowedKeys(path: PropertyKey[]): string[] {
  let s: z.ZodType = configSchema;
  for (const key of path) {
    s = objectOf(s);
    if (!(s instanceof z.ZodObject)) return [];
    s = (s.shape as Record<string, z.ZodType>)[String(key)];
    if (!s) return [];
  }
  s = objectOf(s);
  return s instanceof z.ZodObject ? Object.keys(s.shape) : [];
}

/** A schema unwrapped (optional, default, ...), and of a union its first mapping. */
function objectOf(s: z.ZodType): z.ZodType {
  s = unwrap(s);
  if (!(s instanceof z.ZodUnion)) return s;
  const options = (s as z.ZodUnion<z.ZodType[]>).options.map(unwrap);
  return options.find((o) => o instanceof z.ZodObject) ?? s;
}

/**
 * Of a union's failures, the first issue of the branch whose type matched (a mapping given where a
 * string or a mapping is allowed fails inside the mapping's branch), with the full path; undefined
 * when no branch took the value's type (then the union's own message says what is allowed).
 */
function matchedBranchIssue(issue: z.core.$ZodIssueInvalidUnion): z.core.$ZodIssue | undefined {
  const typeOnly = (errs: z.core.$ZodIssue[]) =>
    errs.length > 0 && errs.every((e) => e.code === "invalid_type" && e.path.length === 0);
  const branch = issue.errors.find((errs) => errs.length > 0 && !typeOnly(errs));
  if (!branch) return undefined;
  return { ...branch[0], path: [...issue.path, ...branch[0].path] } as z.core.$ZodIssue;
}

function unwrap(s: z.ZodType): z.ZodType {
  for (;;) {
    const def = (s as unknown as { _zod: { def: { innerType?: z.ZodType } } })._zod.def;
    if (!def.innerType) return s;
    s = def.innerType;
  }
}

export function formatConfigIssue(issue: z.core.$ZodIssue, source: string): string {
  const inner = issue.code === "invalid_union" ? matchedBranchIssue(issue) : undefined;
  if (inner) return formatConfigIssue(inner, source);
  const where = issue.path.map(String).join(".");
  if (issue.code === "unrecognized_keys") {
    const keys = issue.keys.map((k) => (where ? `${where}.${k}` : k));
    return `${source}: unknown key '${keys[0]}'; allowed here: ${allowedKeys(issue.path).join(", ")}`;
  }
  if (issue.code === "invalid_value")
    return `${source}: ${where}: must be one of ${issue.values.map((v) => JSON.stringify(v)).join(", ")}`;
  return `${source}: ${where}: ${issue.message.replace(/^Invalid input: /, "")}`;
}

export function parseConfig(raw: unknown, source = "config"): TrainConfig {
  if (raw === null || raw === undefined) raw = {};
  if (typeof raw !== "object" || Array.isArray(raw))
    throw new InputError(`${source}: the recipe must be a mapping of sections`);
  const res = configSchema.safeParse(applyPreset(raw as Json, source));
  if (!res.success) throw new InputError(formatConfigIssue(res.error.issues[0], source));
  const c = res.data;
  if (c.engine.kind === "tinker") {
    if (!c.engine.tinker)
      throw new InputError(`${source}: engine.tinker: required with engine.kind tinker (baseModel, url)`);
    if (c.model.preset)
      throw new InputError(
        `${source}: model.preset: a tinker engine starts from engine.tinker.baseModel, not a local preset; give model.tokenizer`,
      );
    if (!c.model.path && !c.model.tokenizer)
      throw new InputError(
        `${source}: model.tokenizer: required with engine.kind tinker (a local directory with the base model's tokenizer.json and tokenizer_config.json)`,
      );
  } else if (!c.model.path && !c.model.preset) c.model.preset = "tiny";
  if (c.engine.sampler) {
    if (c.engine.kind !== "local")
      throw new InputError(
        `${source}: engine.sampler: a separate sampler needs engine.kind local (its weights are written to disk)`,
      );
    if (c.engine.sampler.kind === "vllm" && !c.engine.lora)
      throw new InputError(
        `${source}: engine.sampler.kind: vllm loads new weights over HTTP only as LoRA adapters; train adapters (engine.lora) or use sglang for full weights`,
      );
  }
  if (c.model.path && c.model.preset) throw new InputError(`${source}: model: give either path or preset, not both`);
  if (c.task.worlds > 1 && c.data.train)
    throw new InputError(`${source}: task.worlds: the training rows come from data.train; drop one of them`);
  const asyncProblem = asyncSettingsProblem(c.train);
  if (asyncProblem) throw new InputError(`${source}: ${asyncProblem}`);
  checkDistill(
    c.algorithm.distill,
    {
      engineKind: c.engine.kind,
      needsCritic: advantageEstimator(c.algorithm.estimator).needsValues,
      estimator: c.algorithm.estimator,
    },
    source,
  );
  if (c.loss.aggregation === "seq-mean-token-sum-norm" && !c.loss.normalizer)
    c.loss.normalizer = c.rollout.maxTotalTokens;
  return c;
}

/** Reads a YAML recipe (optional) and applies overrides. */
export function loadConfig(file: string | undefined, overrides: string[] = []): TrainConfig {
  let raw: Json = {};
  if (file) {
    if (!existsSync(file)) throw new InputError(`${file}: recipe not found`);
    const text = readTextInput(
      file,
      (words) => new InputError(`${file}: ${words}`, "--config takes a YAML recipe file"),
    );
    try {
      raw = (parseYaml(text) ?? {}) as Json;
    } catch (e) {
      throw new InputError(`${file}: not valid YAML (${(e as Error).message.split("\n")[0]})`);
    }
    if (typeof raw !== "object" || Array.isArray(raw))
      throw new InputError(`${file}: the recipe must be a mapping of sections`);
    const bad = findForbiddenKey(raw);
    if (bad)
      throw new InputError(
        `${file}: ${bad}: the key '${bad.split(".").pop()}' is not allowed (it would reach the object's prototype)`,
      );
  }
  if (file) anchorTaskPaths(raw, dirname(resolve(file)));
  for (const o of overrides) applyOverride(raw, o);
  return absoluteTaskPaths(parseConfig(raw, file ?? "config"));
}

/** `task.module` and each MCP server's `cwd` made absolute (from the current directory; the server's cwd defaults to it). */
export function absoluteTaskPaths(cfg: TrainConfig): TrainConfig {
  if (cfg.task.module) cfg.task.module = resolve(cfg.task.module);
  for (const s of cfg.task.mcp) if (s.command !== undefined) s.cwd = resolve(s.cwd ?? ".");
  return cfg;
}

/**
 * A relative `task.module`, and each MCP server command's `cwd` (by default the recipe's
 * directory), made absolute from the recipe's directory; anything not of the expected type is left
 * for the schema to name.
 */
function anchorTaskPaths(raw: Json, dir: string): void {
  const task = Object.hasOwn(raw, "task") ? raw.task : undefined;
  if (task === null || typeof task !== "object" || Array.isArray(task)) return;
  const module = Object.hasOwn(task, "module") ? (task as Json).module : undefined;
  if (typeof module === "string" && module !== "" && !isAbsolute(module)) (task as Json).module = resolve(dir, module);
  const mcp = Object.hasOwn(task, "mcp") ? (task as Json).mcp : undefined;
  if (!Array.isArray(mcp)) return;
  for (const s of mcp) {
    if (s === null || typeof s !== "object" || Array.isArray(s) || !Object.hasOwn(s, "command")) continue;
    const cwd = Object.hasOwn(s, "cwd") ? (s as Json).cwd : undefined;
    if (cwd === undefined || typeof cwd === "string") (s as Json).cwd = resolve(dir, cwd ?? ".");
  }
}
