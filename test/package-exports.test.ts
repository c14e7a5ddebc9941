/**
 * The package's public face: the LICENSE matches package.json, the subpath exports
 * (`agent-r1/agent`, `/rl`, `/rewards`, `/data`, `/tools`, `/gateway`, `/serve`, `/testing`) resolve and
 * never load TensorFlow.js, so a tool or env written against them starts in milliseconds, and the
 * main entry holds what a program needs to train (`train`, `enginesFor`, `localEngines`).
 *
 * How the name resolves: the published package (and the compiled dist/test run) through
 * package.json `exports` into dist/src; tsc and tsx (run from the repository root) through the
 * tsconfig `paths` entries into src, so the sources never meet a stale dist copy.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, readFileSync, readdirSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import ts from "typescript";
import { repoRoot } from "./repo-root.js";

const root = repoRoot();
const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as {
  name: string;
  license: string;
  files: string[];
  exports: Record<string, string | { types: string; default: string }>;
};

/** Each subpath and one value it must export. */
const SUBPATHS: Record<string, string> = {
  agent: "defineTool",
  rl: "advantageEstimator",
  rewards: "exactMatch",
  data: "readJsonl",
  tools: "javascriptTool",
  gateway: "agentRollout",
  serve: "startServer",
  testing: "envConformance",
};

test("LICENSE is the Apache License 2.0 that package.json names, with the authors' copyright line", () => {
  assert.equal(pkg.license, "Apache-2.0");
  const text = readFileSync(join(root, "LICENSE"), "utf8");
  assert.equal(text.split("\n")[0], "Copyright 2026 The agent-r1 authors");
  assert.match(
    text,
    /^ {33}Apache License\n {27}Version 2\.0, January 2004\n {24}http:\/\/www\.apache\.org\/licenses\/$/m,
  );
  assert.match(text, /END OF TERMS AND CONDITIONS/);
  assert.equal((text.match(/^ {3}\d\. /gm) ?? []).length, 9, "sections 1-9 of the terms");
});

test("every subpath export points into dist/src with types, has its source, and a tsconfig path to it", () => {
  const tsconfig = JSON.parse(readFileSync(join(root, "tsconfig.json"), "utf8")) as {
    compilerOptions: { paths: Record<string, string[]> };
  };
  const entries = [".", ...Object.keys(SUBPATHS).map((s) => `./${s}`)];
  assert.deepEqual(
    Object.keys(pkg.exports).filter((k) => k !== "./package.json"),
    entries,
  );
  for (const key of entries) {
    const dir = key === "." ? "" : `${key.slice(2)}/`;
    assert.deepEqual(
      pkg.exports[key],
      { types: `./dist/src/${dir}index.d.ts`, default: `./dist/src/${dir}index.js` },
      key,
    );
    assert.ok(existsSync(join(root, "src", dir, "index.ts")), `${key}: src/${dir}index.ts`);
    const name = key === "." ? pkg.name : `${pkg.name}/${key.slice(2)}`;
    assert.deepEqual(tsconfig.compilerOptions.paths[name], [`./src/${dir}index.ts`], name);
  }
  assert.ok(pkg.files.includes("dist/src"), "the published files hold every export");
});

test("the main entry exports what a program needs to train: train and the engine factories", async () => {
  const main = (await import(pkg.name)) as Record<string, unknown>;
  for (const name of ["train", "enginesFor", "localEngines", "Trainer", "loadConfig"])
    assert.equal(typeof main[name], "function", `${pkg.name} exports ${name}`);
  // A deep import of the compiled files is refused by the exports map: the entry points are the way in.
  await assert.rejects(import(`${pkg.name}/dist/src/engine/local/factory.js`), {
    code: "ERR_PACKAGE_PATH_NOT_EXPORTED",
  });
});

/**
 * Files reached from `entry` through imports that load at run time: type-only imports and
 * exports are erased, and dynamic import() loads only when called. Bare specifiers are
 * collected with the first file that imports them.
 */
function staticImports(entry: string): { files: Map<string, string | undefined>; bare: Map<string, string> } {
  const files = new Map<string, string | undefined>();
  const bare = new Map<string, string>();
  const queue: [string, string | undefined][] = [[entry, undefined]];
  while (queue.length > 0) {
    const [file, from] = queue.shift()!;
    if (files.has(file)) continue;
    files.set(file, from);
    const source = ts.createSourceFile(file, readFileSync(file, "utf8"), ts.ScriptTarget.ES2022, false);
    for (const s of source.statements) {
      let spec: ts.Expression | undefined;
      if (ts.isImportDeclaration(s)) {
        const c = s.importClause;
        const typeOnly =
          c !== undefined &&
          (c.isTypeOnly ||
            (!c.name &&
              c.namedBindings !== undefined &&
              ts.isNamedImports(c.namedBindings) &&
              c.namedBindings.elements.length > 0 &&
              c.namedBindings.elements.every((e) => e.isTypeOnly)));
        if (!typeOnly) spec = s.moduleSpecifier;
      } else if (ts.isExportDeclaration(s) && !s.isTypeOnly && s.moduleSpecifier) {
        const named = s.exportClause && ts.isNamedExports(s.exportClause) ? s.exportClause.elements : undefined;
        if (!(named && named.length > 0 && named.every((e) => e.isTypeOnly))) spec = s.moduleSpecifier;
      }
      if (!spec || !ts.isStringLiteral(spec)) continue;
      const name = spec.text;
      if (name.startsWith(".")) {
        if (!name.endsWith(".json")) queue.push([resolve(dirname(file), name).replace(/\.js$/, ".ts"), file]);
      } else if (!bare.has(name)) bare.set(name, file);
    }
  }
  return { files, bare };
}

/** TF.js itself, and the two files that load a backend (TF.js wasm, the native addon). */
const HEAVY = /^@tensorflow\//;
const HEAVY_FILES = ["src/engine/local/tfjs/tf-backend.ts", "src/engine/local/addon.ts"];

for (const sub of Object.keys(SUBPATHS)) {
  test(`agent-r1/${sub}: no import that loads at run time reaches TensorFlow.js`, () => {
    const { files, bare } = staticImports(join(root, "src", sub, "index.ts"));
    const chain = (file: string | undefined): string => {
      const names: string[] = [];
      for (let f = file; f !== undefined; f = files.get(f)) names.push(relative(root, f));
      return names.join(" <- ");
    };
    for (const [name, file] of bare) assert.ok(!HEAVY.test(name), `${name} imported by ${chain(file)}`);
    for (const heavy of HEAVY_FILES)
      assert.ok(!files.has(join(root, heavy)), `${heavy} reached: ${chain(join(root, heavy))}`);
  });
}

test("the C engine's files (src/engine/local/native/) reach no TensorFlow.js module by static imports", () => {
  const dir = join(root, "src", "engine", "local", "native");
  const entries = readdirSync(dir).filter((f) => f.endsWith(".ts"));
  assert.ok(entries.length >= 5, entries.join(", "));
  for (const f of entries) {
    const { files, bare } = staticImports(join(dir, f));
    for (const [name, file] of bare) assert.ok(!HEAVY.test(name), `${f}: ${name} imported by ${relative(root, file)}`);
    assert.ok(!files.has(join(root, "src/engine/local/tfjs/tf-backend.ts")), `${f} reaches the TF.js backend`);
  }
});

test("src/model/ imports nothing from src/engine/ (models are formats; engines compute them)", () => {
  const modelDir = join(root, "src", "model");
  for (const f of readdirSync(modelDir, { recursive: true }) as string[]) {
    if (!f.endsWith(".ts")) continue;
    const { files } = staticImports(join(modelDir, f));
    for (const reached of files.keys())
      assert.ok(
        !reached.startsWith(join(root, "src", "engine") + "/"),
        `src/model/${f} reaches ${relative(root, reached)}`,
      );
  }
});

test("the static walk sees TF.js behind the TF.js backend, and not behind the main entry, which loads a backend only when an engine opens", () => {
  const tfjs = staticImports(join(root, "src", "engine", "local", "tfjs", "tfjs-backend.ts"));
  assert.ok(
    [...tfjs.bare.keys()].some((n) => HEAVY.test(n)),
    "the check can fail",
  );
  const main = staticImports(join(root, "src", "index.ts"));
  assert.ok(![...main.bare.keys()].some((n) => HEAVY.test(n)));
});

test("importing each subpath and the main entry by name in a fresh process resolves no @tensorflow module; the TF.js backend does", async () => {
  const js = fileURLToPath(new URL("./fixtures/import-entries.js", import.meta.url));
  const script = existsSync(js) ? js : js.replace(/\.js$/, ".ts");
  // The backend module beside this test's build: dist/src/... from dist/test, src/... under tsx.
  const built = fileURLToPath(new URL("../src/engine/local/tfjs/tfjs-backend.js", import.meta.url));
  const tfjsBackend = existsSync(built) ? built : built.replace(/\.js$/, ".ts");
  const specs = [
    ...Object.entries(SUBPATHS).map(([sub, value]) => `${pkg.name}/${sub}:${value}`),
    `${pkg.name}:LocalEngine`,
    `${pathToFileURL(tfjsBackend)}:openBackend`,
  ];
  const child = spawn(process.execPath, [...process.execArgv, script, ...specs], {
    cwd: root,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "",
    err = "";
  child.stdout.on("data", (d) => (out += d));
  child.stderr.on("data", (d) => (err += d));
  const code = await new Promise<number | null>((r) => child.on("exit", r));
  assert.equal(code, 0, err);
  const results = JSON.parse(out) as Record<string, string>;
  for (const sub of Object.keys(SUBPATHS)) assert.equal(results[`${pkg.name}/${sub}`], "ok", `${pkg.name}/${sub}`);
  assert.equal(results[pkg.name], "ok", "the main entry loads no backend until an engine opens");
  assert.match(
    results[pathToFileURL(tfjsBackend).href],
    /loads TensorFlow\.js: @tensorflow\//,
    "the TF.js backend loads TF.js (so the probe can see it)",
  );
});
