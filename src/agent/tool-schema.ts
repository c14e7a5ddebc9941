/**
 * A tool's argument schema, in whatever form the tool came with:
 *  - a zod schema (ours, and the AI SDK's and Agents SDK's usual choice);
 *  - any Standard Schema validator (valibot, arktype, effect, ...: an object with `~standard`),
 *    with its JSON Schema from Standard JSON Schema (`~standard.jsonSchema`) or given beside it;
 *  - a plain JSON Schema object (MCP tools, OpenAI function definitions), checked with ajv.
 * Each becomes the JSON Schema the chat template lists, and a validator whose failure is one line
 * naming each bad field (the model reads it as the tool's error observation).
 */
import { Ajv, type ErrorObject } from "ajv";
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

let ajv: Ajv | undefined;
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
    ajv ??= new Ajv({ strict: false, allErrors: true });
    let check: ReturnType<Ajv["compile"]>;
    try {
      check = ajv.compile(parameters);
    } catch (err) {
      throw new InputError(`${where}: the JSON Schema of its arguments does not compile: ${(err as Error).message}`);
    }
    return {
      parameters,
      async validate(args) {
        return check(args) ? { success: true, data: args as T } : { success: false, error: ajvErrors(check.errors) };
      },
    };
  }
  throw new InputError(
    `${where}: inputSchema must be a zod schema, a Standard Schema validator or a JSON Schema object ({ type: "object", ... })`,
  );
}
