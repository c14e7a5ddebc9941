/** The configuration reference as a Markdown table, generated from the schema (docs/reference.md embeds it; a test keeps them equal). */
import { z } from "zod";
import { configSchema } from "./config.js";

interface JsonSchema {
  type?: string;
  enum?: unknown[];
  default?: unknown;
  properties?: Record<string, JsonSchema>;
  additionalProperties?: unknown;
  minimum?: number;
  exclusiveMinimum?: number;
  maximum?: number;
  description?: string;
  prefixItems?: JsonSchema[];
  anyOf?: JsonSchema[];
}

function typeOf(s: JsonSchema): string {
  if (s.enum) return s.enum.map((v) => `\`${String(v)}\``).join(" \\| ");
  if (s.prefixItems) return `[${s.prefixItems.map(typeOf).join(", ")}]`;
  if (s.anyOf) return s.anyOf.map(typeOf).join(" or ");
  const bounds = [
    s.minimum !== undefined ? `≥ ${s.minimum}` : "",
    s.exclusiveMinimum !== undefined ? `> ${s.exclusiveMinimum}` : "",
    s.maximum !== undefined && s.maximum < 1e15 ? `≤ ${s.maximum}` : "",
  ]
    .filter(Boolean)
    .join(", ");
  return `${s.type ?? "object"}${bounds ? ` (${bounds})` : ""}`;
}

export function configReference(): string {
  const root = z.toJSONSchema(configSchema, { io: "input" }) as JsonSchema;
  const lines = ["| key | type | default | meaning |", "|---|---|---|---|"];
  for (const [section, sec] of Object.entries(root.properties ?? {})) {
    for (const [key, s] of Object.entries(sec.properties ?? {})) {
      if (s.properties) {
        for (const [sub, t] of Object.entries(s.properties))
          lines.push(`| \`${section}.${key}.${sub}\` | ${typeOf(t)} | ${fmt(t.default)} | ${t.description ?? ""} |`);
      } else lines.push(`| \`${section}.${key}\` | ${typeOf(s)} | ${fmt(s.default)} | ${s.description ?? ""} |`);
    }
  }
  return lines.join("\n");
}

function fmt(v: unknown): string {
  return v === undefined ? "—" : `\`${JSON.stringify(v)}\``;
}
