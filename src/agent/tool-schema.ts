/**
 * A tool's argument schema, in whatever form the tool came with:
 *  - a zod schema (ours, and the AI SDK's and Agents SDK's usual choice);
 *  - any Standard Schema validator (valibot, arktype, effect, ...: an object with `~standard`),
 *    with its JSON Schema from Standard JSON Schema (`~standard.jsonSchema`) or given beside it;
 *  - a plain JSON Schema object (MCP tools, OpenAI function definitions), checked with ajv.
 * Each becomes the JSON Schema the chat template lists, and a validator whose failure is one line
 * naming each bad field (the model reads it as the tool's error observation).
 *
 * A JSON Schema may come from a stranger (an MCP server), so ajv runs its `pattern`s (and
 * `patternProperties`) with RE2 (re2js), in time linear in the argument: a backtracking RegExp
 * would let `^(a+)+$` and a 40-character argument block the event loop for minutes, where no tool
 * timeout can fire. A pattern RE2 cannot run (a backreference, a lookaround) is refused when the
 * schema is compiled, naming the pattern. `format` is not checked (no format runs a pattern).
 */
import { Ajv, type ErrorObject, type Options as AjvOptions } from "ajv";
import { RE2JS } from "re2js";
import { z } from "zod";
import { InputError } from "../util/errors.js";

export type ValidationResult<T> = { success: true; data: T } | { success: false; error: string };

/** The Standard Schema v1 interface (https://standardschema.dev), as far as it is used here. */
export interface StandardSchemaV1<Output = unknown> {
  readonly "~standard": {
    readonly version: 1;
    readonly vendor: string;
    readonly validate: (
      value: unknown,
    ) =>
      | { value: Output; issues?: undefined }
      | { issues: readonly { message: string; path?: readonly (PropertyKey | { key: PropertyKey })[] }[] }
      | Promise<
          | { value: Output; issues?: undefined }
          | { issues: readonly { message: string; path?: readonly (PropertyKey | { key: PropertyKey })[] }[] }
        >;
    readonly jsonSchema?: { input?: (o: { target: string }) => Record<string, unknown> };
  };
}

export type JsonSchemaObject = Record<string, unknown> & { type: "object" };

/** What a tool's inputSchema may be. */
export type AnySchema = z.ZodType | StandardSchemaV1 | JsonSchemaObject;

export interface ArgumentSchema<T = unknown> {
  /** JSON Schema of the arguments, an object schema without `$schema`. */
  parameters: Record<string, unknown>;
  validate(args: unknown): Promise<ValidationResult<T>>;
}

const isZod = (s: unknown): s is z.ZodType => s instanceof z.ZodType;
const isStandard = (s: unknown): s is StandardSchemaV1 =>
  typeof s === "object" &&
  s !== null &&
  "~standard" in s &&
  typeof (s as StandardSchemaV1)["~standard"]?.validate === "function";
const isJsonSchema = (s: unknown): s is JsonSchemaObject =>
  typeof s === "object" && s !== null && !Array.isArray(s) && (s as { type?: unknown }).type === "object";

const pathText = (path: readonly (PropertyKey | { key: PropertyKey })[] | undefined) =>
  path && path.length ? path.map((p) => String(typeof p === "object" ? p.key : p)).join(".") : "(arguments)";

const ajvErrors = (errs: ErrorObject[] | null | undefined) =>
  (errs ?? [])
    .map(
      (e) =>
        `${e.instancePath ? e.instancePath.slice(1).replace(/\//g, ".") : "(arguments)"}: ${e.message ?? "is invalid"}`,
    )
    .join("; ");

function objectSchema(json: Record<string, unknown>, where: string): Record<string, unknown> {
  if (json.type !== "object")
    throw new InputError(
      `${where}: the arguments' schema must be an object schema, got type ${JSON.stringify(json.type)}`,
    );
  const { $schema: _drop, ...rest } = json;
  return rest;
}

/** The schema of a tool's arguments, from any of the forms above; `jsonSchema` names the JSON Schema where the validator cannot. */
export function argumentSchema<T = unknown>(
  schema: unknown,
  where: string,
  jsonSchema?: Record<string, unknown>,
): ArgumentSchema<T> {
  if (isZod(schema)) {
    let json: Record<string, unknown>;
    try {
      json = (jsonSchema ?? z.toJSONSchema(schema, { io: "input" })) as Record<string, unknown>;
    } catch (err) {
      throw new InputError(
        `${where}: inputSchema cannot be written as JSON Schema: ${(err as Error).message}`,
        "avoid transforms and custom types in inputSchema",
      );
    }
    const parameters = objectSchema(json, where);
    return {
      parameters,
      async validate(args) {
        const r = await schema.safeParseAsync(args);
        return r.success
          ? { success: true, data: r.data as T }
          : {
              success: false,
              error: r.error.issues.map((i) => `${pathText(i.path as PropertyKey[])}: ${i.message}`).join("; "),
            };
      },
    };
  }
  if (isStandard(schema)) {
    const std = schema["~standard"];
    let json = jsonSchema;
    if (!json && std.jsonSchema?.input) json = std.jsonSchema.input({ target: "draft-2020-12" });
    if (!json)
      throw new InputError(
        `${where}: a ${std.vendor} schema does not say its JSON Schema`,
        "pass jsonSchema beside inputSchema (the model is shown the arguments as JSON Schema)",
      );
    return {
      parameters: objectSchema(json, where),
      async validate(args) {
        const r = await std.validate(args);
        return r.issues
          ? { success: false, error: r.issues.map((i) => `${pathText(i.path)}: ${i.message}`).join("; ") }
          : { success: true, data: r.value as T };
      },
    };
  }
  if (isJsonSchema(schema)) {
    const parameters = objectSchema(schema, where);
    const check = compileJsonSchema(parameters, where);
    return {
      parameters,
      async validate(args) {
        const error = check(args);
        return error === null ? { success: true, data: args as T } : { success: false, error };
      },
    };
  }
  throw new InputError(
    `${where}: inputSchema must be a zod schema, a Standard Schema validator or a JSON Schema object ({ type: "object", ... })`,
  );
}

// ---- JSON Schema with linear-time patterns ----

/** A pattern the linear-time engine will not run; `compileJsonSchema` names the schema it is in. */
class RefusedPattern extends Error {}

/** The most RE2 instructions one pattern may compile to (a measure of its cost per character). */
export const MAX_PATTERN_PROGRAM = 10_000;

/** Code point ranges of ECMAScript's `\s` (WhiteSpace and LineTerminator); RE2's `\s` is ASCII only. */
const SPACE: [number, number][] = [
  [0x09, 0x0d],
  [0x20, 0x20],
  [0xa0, 0xa0],
  [0x1680, 0x1680],
  [0x2000, 0x200a],
  [0x2028, 0x2029],
  [0x202f, 0x202f],
  [0x205f, 0x205f],
  [0x3000, 0x3000],
  [0xfeff, 0xfeff],
];

const hex = (c: number) => `\\x{${c.toString(16)}}`;
const rangesText = (ranges: [number, number][]) =>
  ranges.map(([a, b]) => (a === b ? hex(a) : `${hex(a)}-${hex(b)}`)).join("");

function complement(ranges: [number, number][]): [number, number][] {
  const out: [number, number][] = [];
  let next = 0;
  for (const [a, b] of ranges) {
    if (a > next) out.push([next, a - 1]);
    next = b + 1;
  }
  if (next <= 0x10ffff) out.push([next, 0x10ffff]);
  return out;
}

const SPACE_TEXT = rangesText(SPACE);
const NOT_SPACE_TEXT = rangesText(complement(SPACE));
/** ECMAScript's `.` stops at \n, \r, U+2028 and U+2029; RE2's only at \n. */
const DOT = "[^\\n\\r\\x{2028}\\x{2029}]";
const ANY = "\\x{0}-\\x{10ffff}";

/** Long General_Category names of `\p{...}` as RE2 knows them (by their short names). */
const CATEGORY: Record<string, string> = {
  Letter: "L",
  Cased_Letter: "LC",
  Uppercase_Letter: "Lu",
  Lowercase_Letter: "Ll",
  Titlecase_Letter: "Lt",
  Modifier_Letter: "Lm",
  Other_Letter: "Lo",
  Mark: "M",
  Nonspacing_Mark: "Mn",
  Spacing_Mark: "Mc",
  Enclosing_Mark: "Me",
  Number: "N",
  Decimal_Number: "Nd",
  digit: "Nd",
  Letter_Number: "Nl",
  Other_Number: "No",
  Punctuation: "P",
  punct: "P",
  Connector_Punctuation: "Pc",
  Dash_Punctuation: "Pd",
  Open_Punctuation: "Ps",
  Close_Punctuation: "Pe",
  Initial_Punctuation: "Pi",
  Final_Punctuation: "Pf",
  Other_Punctuation: "Po",
  Symbol: "S",
  Math_Symbol: "Sm",
  Currency_Symbol: "Sc",
  Modifier_Symbol: "Sk",
  Other_Symbol: "So",
  Separator: "Z",
  Space_Separator: "Zs",
  Line_Separator: "Zl",
  Paragraph_Separator: "Zp",
  Other: "C",
  Control: "Cc",
  cntrl: "Cc",
  Format: "Cf",
  Surrogate: "Cs",
  Private_Use: "Co",
  Unassigned: "Cn",
};

/** `\p{Script=Greek}`, `\p{gc=Letter}`, `\p{Letter}` as RE2 writes them (`\p{Greek}`, `\p{L}`). */
function propertyName(body: string): string {
  const eq = body.indexOf("=");
  const [key, value] = eq < 0 ? ["", body] : [body.slice(0, eq), body.slice(eq + 1)];
  if (key === "Script" || key === "sc") return value;
  if (key === "" || key === "General_Category" || key === "gc") return CATEGORY[value] ?? value;
  throw new RefusedPattern(`RE2 has no \\p{${body}}`);
}

/** The code point of the `\u` escape at `at` of `pattern` (a surrogate pair of escapes counts as one), and its end. */
function unicodeEscape(pattern: string, at: number): [number, number] {
  if (pattern[at + 2] === "{") {
    const close = pattern.indexOf("}", at + 3);
    return [parseInt(pattern.slice(at + 3, close), 16), close + 1];
  }
  const unit = parseInt(pattern.slice(at + 2, at + 6), 16);
  if (unit >= 0xd800 && unit <= 0xdbff && pattern.startsWith("\\u", at + 6)) {
    const low = parseInt(pattern.slice(at + 8, at + 12), 16);
    if (low >= 0xdc00 && low <= 0xdfff && /^[0-9a-fA-F]{4}$/.test(pattern.slice(at + 8, at + 12)))
      return [0x10000 + ((unit - 0xd800) << 10) + (low - 0xdc00), at + 12];
  }
  return [unit, at + 6];
}

/**
 * An ECMAScript pattern (with the `u` flag, as ajv compiles them) in RE2's syntax and meaning:
 * `\uXXXX` and `\u{X}` become `\x{X}`, `\s` and `.` get ECMAScript's sets, `(?<name>` becomes
 * `(?P<name>`; what needs backtracking is refused, saying what it is.
 */
function toRe2(pattern: string): string {
  let out = "";
  let inClass = false;
  let i = 0;
  const n = pattern.length;
  while (i < n) {
    const c = pattern[i];
    if (c === "\\") {
      const e = pattern[i + 1];
      if (e === "u") {
        const [code, end] = unicodeEscape(pattern, i);
        out += hex(code);
        i = end;
        continue;
      }
      if (e === "p" || e === "P") {
        const close = pattern.indexOf("}", i + 3);
        out += `\\${e}{${propertyName(pattern.slice(i + 3, close))}}`;
        i = close + 1;
        continue;
      }
      if (e >= "1" && e <= "9") throw new RefusedPattern(`it has a backreference, \\${e}`);
      if (e === "k") throw new RefusedPattern("it has a backreference, \\k<...>");
      if (e === "c") out += hex(pattern.charCodeAt(i + 2) % 32);
      else if (e === "0") out += hex(0);
      else if (e === "s") out += inClass ? SPACE_TEXT : `[${SPACE_TEXT}]`;
      else if (e === "S") out += inClass ? NOT_SPACE_TEXT : `[^${SPACE_TEXT}]`;
      else if (e === "b" && inClass) out += hex(8);
      else out += c + e;
      i += e === "c" ? 3 : 2;
      continue;
    }
    if (inClass) {
      if (c === "]") inClass = false;
      out += c === "[" ? "\\[" : c;
      i++;
      continue;
    }
    if (c === "[") {
      const negated = pattern[i + 1] === "^";
      const first = i + (negated ? 2 : 1);
      if (pattern[first] === "]") {
        // [] matches nothing and [^] anything; RE2 reads both as unclosed.
        out += negated ? `[${ANY}]` : `[^${ANY}]`;
        i = first + 1;
        continue;
      }
      inClass = true;
      out += negated ? "[^" : "[";
      i = first;
      continue;
    }
    if (c === "(" && pattern[i + 1] === "?") {
      const kind = pattern.slice(i + 2, i + 4);
      if (kind[0] === "=" || kind[0] === "!" || kind === "<=" || kind === "<!")
        throw new RefusedPattern(`it has a lookaround, ${pattern.slice(i, i + (kind[0] === "<" ? 4 : 3))}...)`);
      if (kind[0] === "<") {
        out += "(?P<";
        i += 3;
        continue;
      }
    }
    out += c === "." ? DOT : c;
    i++;
  }
  return out;
}

/** A one-line rendering of a pattern for an error message. */
const showPattern = (p: string) => JSON.stringify(p.length > 120 ? `${p.slice(0, 120)}...` : p);

/** ajv's `code.regExp`: each pattern a schema holds, compiled for RE2 (or refused). */
function linearRegExp(pattern: string, flags: string): { test(s: string): boolean; toString(): string } {
  try {
    new RegExp(pattern, flags); // its syntax as ECMAScript defines it; compiling runs nothing
  } catch (err) {
    throw new RefusedPattern(
      `pattern ${showPattern(pattern)} is not a valid regular expression: ${(err as Error).message}`,
    );
  }
  let re: RE2JS;
  try {
    re = RE2JS.compile(toRe2(pattern));
  } catch (err) {
    const why =
      err instanceof RefusedPattern
        ? err.message
        : `RE2: ${(err as Error).message.replace(/^error parsing regexp: /, "")}`;
    throw new RefusedPattern(`pattern ${showPattern(pattern)} cannot be checked in linear time: ${why}`);
  }
  if (re.programSize() > MAX_PATTERN_PROGRAM)
    throw new RefusedPattern(
      `pattern ${showPattern(pattern)} is too costly to check (${re.programSize()} RE2 instructions; the limit is ${MAX_PATTERN_PROGRAM})`,
    );
  return { test: (s: string) => re.test(s), toString: () => `/${pattern}/${flags}` };
}
linearRegExp.code = "linearRegExp";

const AJV_OPTIONS: AjvOptions = {
  strict: false,
  allErrors: true,
  // No format is checked: ajv knows none without ajv-formats, and would log each unknown one.
  validateFormats: false,
  // A schema's $id is not registered, so two tools (or servers) may use the same one.
  addUsedSchema: false,
  code: { regExp: linearRegExp },
};
/** ajv keeps every schema it compiled (and its code); a fresh instance every so many bounds that. */
const AJV_REUSE = 256;
let shared: { ajv: Ajv; uses: number } | undefined;

function schemaCompiler(): Ajv {
  if (!shared || shared.uses >= AJV_REUSE) shared = { ajv: new Ajv(AJV_OPTIONS), uses: 0 };
  shared.uses++;
  return shared.ajv;
}

/**
 * A JSON Schema as a check that returns null for a valid value, else one line naming each bad
 * field. Throws an InputError naming `where` (and the pattern at fault) when it does not compile.
 */
export function compileJsonSchema(
  schema: Record<string, unknown>,
  where: string,
  what = "the JSON Schema of its arguments",
): (value: unknown) => string | null {
  let check: ReturnType<Ajv["compile"]>;
  try {
    check = schemaCompiler().compile(schema);
  } catch (err) {
    if (err instanceof RefusedPattern) throw new InputError(`${where}: ${what} is refused: ${err.message}`);
    throw new InputError(`${where}: ${what} does not compile: ${(err as Error).message}`);
  }
  return (value) => (check(value) ? null : ajvErrors(check.errors));
}
