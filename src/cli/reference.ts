/**
 * docs/reference.md, generated: every command with its flags, the recipe keys, the model
 * presets, the environment variables. `node --import tsx scripts/update-readme.ts` writes it;
 * test/reference.test.ts keeps the file equal to this.
 */
import { configReference } from "../train/config-reference.js";
import { PRESETS } from "../model/config.js";
import { SETTINGS_DOC } from "../util/settings.js";
import type { FlagSpec } from "./args.js";
import type { Command } from "./command.js";

const cell = (s: string) => s.replace(/\|/g, "\\|");

function flagTable(spec: FlagSpec): string[] {
  const rows = Object.entries(spec).map(([name, f]) => {
    const value = f.type === "string" ? `\`${cell(f.value)}\`` : "";
    const def = f.type === "string" ? (f.default ?? f.fallback) : undefined;
    const notes = [
      f.type === "string" && f.multiple ? "repeatable" : "",
      def !== undefined ? `default: ${cell(String(def))}` : "",
    ]
      .filter(Boolean)
      .join("; ");
    return `| \`--${name}\` | ${value} | ${cell(f.description)}${notes ? ` (${notes})` : ""} |`;
  });
  return rows.length ? ["| flag | value | meaning |", "|---|---|---|", ...rows] : ["(no flags)"];
}

export function referenceDoc(commands: readonly Command[]): string {
  const out = [
    "# Reference",
    "",
    "Generated from the code (`node --import tsx scripts/update-readme.ts`); `test/reference.test.ts` keeps this",
    "file equal to it. `agent-r1 CMD --help` prints the same flags.",
    "",
    "## Commands",
    "",
    "Every command prints one line per error (`error: ...`, naming the file, field or flag) and exits 1; a",
    "mistake in the command line itself (an unknown flag, a missing or malformed value) exits 2.",
    "`agent-r1 --version` prints the version.",
    "",
  ];
  for (const c of commands)
    out.push(
      `### \`agent-r1 ${c.name}\``,
      "",
      `${c.summary}.`,
      "",
      "```",
      c.usage,
      "```",
      "",
      ...flagTable(c.flags),
      "",
    );
  out.push(
    "## Recipe keys",
    "",
    "A recipe is a YAML file of these sections; any key can be overridden on the command line as",
    "`key.path=value` (the value is read as YAML). Unknown keys are errors that list the allowed ones.",
    "",
    configReference(),
    "",
    "## Model presets",
    "",
    "`model.preset` and `agent-r1 init-model --preset`: a Qwen2 layout with tied embeddings; the vocabulary",
    "is the tokenizer's, rounded up to a multiple of 64.",
    "",
    "| preset | hidden | layers | heads | kv heads | ffn |",
    "|---|---:|---:|---:|---:|---:|",
    ...Object.entries(PRESETS).map(
      ([name, p]) =>
        `| ${name} | ${p.hidden_size} | ${p.num_hidden_layers} | ${p.num_attention_heads} | ${p.num_key_value_heads} | ${p.intermediate_size} |`,
    ),
    "",
    "## Environment variables",
    "",
    "Read in one place (`src/util/settings.ts`); options given in code, flags or recipes come first.",
    "",
    "| variable | meaning |",
    "|---|---|",
    ...SETTINGS_DOC.map(([name, meaning]) => `| \`${name}\` | ${meaning} |`),
    "",
  );
  return out.join("\n");
}
