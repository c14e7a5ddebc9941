/**
 * Regenerates the README's configuration reference from the schema and its example blocks from
 * the example files: node --import tsx scripts/update-readme.ts
 */
import { readFileSync, writeFileSync } from "node:fs";
import { configReference } from "../src/train/config-reference.js";
import { refreshReadmeExamples } from "../src/train/readme-examples.js";

const root = new URL("../", import.meta.url);
const file = new URL("README.md", root);
const text = readFileSync(file, "utf8");
const withConfig = text.replace(/(<!-- config-reference:start -->\n)[\s\S]*?(<!-- config-reference:end -->)/, `$1${configReference()}\n$2`);
const next = refreshReadmeExamples(withConfig, (path) => readFileSync(new URL(path, root), "utf8"));
writeFileSync(file, next);
console.log(next === text ? "README already up to date" : "README updated");
