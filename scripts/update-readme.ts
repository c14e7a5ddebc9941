/** Regenerates the README's configuration reference from the schema: node --import tsx scripts/update-readme.ts */
import { readFileSync, writeFileSync } from "node:fs";
import { configReference } from "../src/train/config-reference.js";

const file = new URL("../README.md", import.meta.url);
const text = readFileSync(file, "utf8");
const next = text.replace(/(<!-- config-reference:start -->\n)[\s\S]*?(<!-- config-reference:end -->)/, `$1${configReference()}\n$2`);
writeFileSync(file, next);
console.log(next === text ? "README already up to date" : "README updated");
