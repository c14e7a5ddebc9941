/**
 * How a TaskRow maps to parquet columns (the layout pandas/pyarrow give
 * Agent-R1's preprocessed rows, so verl reads our files and we read theirs):
 *
 *   data_source   string
 *   agent_name    string
 *   prompt        list<struct<role: string, content: string>>
 *   ability       string                  (null = absent)
 *   reward_model  struct<style: string, ground_truth: string>
 *   extra_info    struct<one field per key seen in any row>, each typed from its values:
 *                   all strings -> string, all booleans -> boolean,
 *                   all safe integers -> int64, all finite numbers -> double,
 *                   anything else (objects, arrays, null, mixed) -> string holding JSON,
 *                   listed in the key-value metadata "agent_r1.json_fields"
 *                 a row without the key stores null there (null = absent on reading)
 *   env_kwargs    string (already JSON in Agent-R1 rows)
 *
 * Every column and struct field is OPTIONAL, as pyarrow writes them. Reading
 * reverses this exactly for files we wrote. Files written elsewhere: int64 ->
 * number (an integer beyond 2^53 is a bad row), nulls inside structs -> absent
 * keys (pyarrow fills missing struct keys with null), a struct env_kwargs -> its JSON.
 * Prompt messages with fields other than role and content cannot be written:
 * use JSONL for those rows.
 */
import type { KeyValue, SchemaElement } from "hyparquet";
import type { ColumnSource } from "hyparquet-writer";
import { InputError } from "../util/errors.js";
import type { TaskRow } from "../tasks/types.js";
import { BadRow } from "./read-result.js";

export const JSON_FIELDS_KEY = "agent_r1.json_fields";

type Kind = "string" | "boolean" | "int" | "double" | "json";

const leaf = (name: string, type: "BYTE_ARRAY" | "BOOLEAN" | "INT64" | "DOUBLE" = "BYTE_ARRAY"): SchemaElement => ({
  name,
  type,
  repetition_type: "OPTIONAL",
  ...(type === "BYTE_ARRAY" ? { converted_type: "UTF8" as const } : {}),
});
const group = (name: string, children: number, extra: Partial<SchemaElement> = {}): SchemaElement => ({
  name,
  repetition_type: "OPTIONAL",
  num_children: children,
  ...extra,
});
const LEAF_TYPE = {
  string: "BYTE_ARRAY",
  json: "BYTE_ARRAY",
  boolean: "BOOLEAN",
  int: "INT64",
  double: "DOUBLE",
} as const;

function kindOf(values: unknown[]): Kind {
  if (values.every((v) => typeof v === "string")) return "string";
  if (values.every((v) => typeof v === "boolean")) return "boolean";
  if (values.every((v) => Number.isSafeInteger(v))) return "int";
  if (values.every((v) => typeof v === "number" && Number.isFinite(v))) return "double";
  return "json";
}

function encode(kind: Kind, v: unknown): unknown {
  if (v === undefined) return null;
  if (kind === "json") return JSON.stringify(v);
  return kind === "int" ? BigInt(v as number) : v;
}

function checkMessages(rows: readonly TaskRow[]): void {
  rows.forEach((r, i) =>
    r.prompt.forEach((m, j) => {
      const extra = Object.keys(m).find(
        (k) => k !== "role" && k !== "content" && (m as unknown as Record<string, unknown>)[k] !== undefined,
      );
      if (extra)
        throw new InputError(
          `row ${i + 1}: prompt[${j}] has '${extra}'; parquet rows hold prompt messages as { role, content }`,
          "write these rows as JSONL",
        );
    }),
  );
}

function checkExtraValue(i: number, key: string, v: unknown): void {
  if (typeof v === "number" && !Number.isFinite(v))
    throw new InputError(`row ${i + 1}: extra_info.${key} is ${v}, which JSON and parquet rows cannot hold`);
}

export interface ParquetLayout {
  schema: SchemaElement[];
  columnData: ColumnSource[];
  kvMetadata: KeyValue[];
}

export function layoutRows(rows: readonly TaskRow[]): ParquetLayout {
  checkMessages(rows);
  const keys = [
    ...new Set(rows.flatMap((r) => Object.keys(r.extra_info).filter((k) => r.extra_info[k] !== undefined))),
  ];
  rows.forEach((r, i) => keys.forEach((k) => checkExtraValue(i, k, r.extra_info[k])));
  const kinds = keys.map((k) => kindOf(rows.map((r) => r.extra_info[k]).filter((v) => v !== undefined)));
  const schema: SchemaElement[] = [
    { name: "root", num_children: 7 },
    leaf("data_source"),
    leaf("agent_name"),
    group("prompt", 1, { converted_type: "LIST" }),
    { name: "list", repetition_type: "REPEATED", num_children: 1 },
    group("element", 2),
    leaf("role"),
    leaf("content"),
    leaf("ability"),
    group("reward_model", 2),
    leaf("style"),
    leaf("ground_truth"),
    group("extra_info", keys.length),
    ...keys.map((k, i) => leaf(k, LEAF_TYPE[kinds[i]])),
    leaf("env_kwargs"),
  ];
  const col = (name: string, f: (r: TaskRow) => unknown): ColumnSource => ({ name, data: rows.map(f) });
  const columnData = [
    col("data_source", (r) => r.data_source),
    col("agent_name", (r) => r.agent_name),
    col("prompt", (r) => r.prompt.map((m) => ({ role: m.role, content: m.content }))),
    col("ability", (r) => r.ability ?? null),
    col("reward_model", (r) => ({ style: r.reward_model.style, ground_truth: r.reward_model.ground_truth })),
    col("extra_info", (r) => Object.fromEntries(keys.map((k, i) => [k, encode(kinds[i], r.extra_info[k])]))),
    col("env_kwargs", (r) => r.env_kwargs ?? null),
  ];
  const jsonFields = keys.filter((_, i) => kinds[i] === "json").map((k) => `extra_info.${k}`);
  return { schema, columnData, kvMetadata: [{ key: JSON_FIELDS_KEY, value: JSON.stringify(jsonFields) }] };
}

/** Plain JSON from what hyparquet returns: bigint -> number, null struct fields -> absent. */
function plain(v: unknown, path: string): unknown {
  if (typeof v === "bigint") {
    if (v > BigInt(Number.MAX_SAFE_INTEGER) || v < BigInt(Number.MIN_SAFE_INTEGER))
      throw new BadRow(`${path}: integer ${v} does not fit a JavaScript number`);
    return Number(v);
  }
  if (Array.isArray(v)) return v.map((x, i) => plain(x, `${path}[${i}]`));
  if (typeof v === "object" && v !== null && !(v instanceof Date) && !(v instanceof Uint8Array)) {
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v))
      if (x !== null && x !== undefined) out[k] = plain(x, path ? `${path}.${k}` : k);
    return out;
  }
  return v;
}

/** One parquet record back to a row object (validated by the caller). */
export function unlayoutRow(raw: Record<string, unknown>, jsonFields: readonly string[]): unknown {
  const row = plain(raw, "") as Record<string, unknown>;
  for (const field of jsonFields) {
    const dot = field.indexOf(".");
    const top = field.slice(0, dot),
      key = field.slice(dot + 1);
    const holder = row[top] as Record<string, unknown> | undefined;
    if (holder === undefined || typeof holder[key] !== "string") continue;
    try {
      holder[key] = JSON.parse(holder[key] as string);
    } catch {
      throw new BadRow(`${field}: not valid JSON although the file lists it in ${JSON_FIELDS_KEY}`);
    }
  }
  if (typeof row.env_kwargs === "object" && row.env_kwargs !== null) row.env_kwargs = JSON.stringify(row.env_kwargs);
  return row;
}
