#!/usr/bin/env node
/**
 * Install step: builds the native addon (native/, binding.gyp) with node-gyp, and
 * says in one line what it built: the project's own matrix-product kernels always,
 * and the system BLAS too when scripts/detect-blas.js found one (OpenBLAS, Accelerate).
 * The addon is optional: when the build fails (no C compiler, no make, no Node
 * headers) this prints one line and exits 0, and the engine uses its TensorFlow.js
 * backend. Env AGENT_R1_NATIVE_SKIP_BUILD=1 skips the build.
 */
import { spawnSync } from "node:child_process";
import { existsSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const addon = join(root, "build", "Release", "agent_r1_native.node");
const say = (line) => console.log(`agent-r1: ${line}`);

/** node-gyp's entry: npm tells scripts where its bundled copy is; else look beside npm, else PATH. */
function nodeGyp() {
  const candidates = [process.env.npm_config_node_gyp];
  if (process.env.npm_execpath)
    candidates.push(join(dirname(process.env.npm_execpath), "..", "node_modules", "node-gyp", "bin", "node-gyp.js"));
  candidates.push(
    join(
      dirname(process.execPath),
      "..",
      "lib",
      "node_modules",
      "npm",
      "node_modules",
      "node-gyp",
      "bin",
      "node-gyp.js",
    ),
  );
  const found = candidates.find((c) => c && existsSync(c));
  return found ? [process.execPath, found] : ["node-gyp"];
}

/** Node's own headers when they are installed beside it (Debian's nodejs): no download needed. */
function nodedirArgs() {
  if (process.env.npm_config_nodedir) return [];
  const prefix = join(dirname(process.execPath), "..");
  return existsSync(join(prefix, "include", "node", "common.gypi")) ? [`--nodedir=${prefix}`] : [];
}

/** The most telling line of a failed build's output. */
function reason(output) {
  const lines = output
    .split("\n")
    .map((l) => l.trim())
    .filter(Boolean);
  const pick =
    lines.find((l) =>
      /cannot find -l|fatal error|command not found|: not found|^make: .*No such file or directory/i.test(l),
    ) ?? // linker, missing header, no compiler or make
    lines.find((l) => /^gyp ERR! stack \w*Error: /.test(l))?.replace(/^gyp ERR! stack \w*Error: /, "") ?? // node-gyp's own failure
    lines.find((l) => /error/i.test(l)) ??
    lines.at(-1) ??
    "unknown error";
  return pick.replace(/^gyp ERR! /, "").slice(0, 200);
}

function main() {
  if (process.env.AGENT_R1_NATIVE_SKIP_BUILD) {
    say("native addon build skipped (AGENT_R1_NATIVE_SKIP_BUILD); the tfjs backend will be used");
    return;
  }
  const [cmd, ...pre] = nodeGyp();
  const res = spawnSync(cmd, [...pre, "rebuild", ...nodedirArgs()], {
    cwd: root,
    encoding: "utf8",
    timeout: 300_000,
    env: process.env,
  });
  if (res.error || res.status !== 0) {
    rmSync(addon, { force: true });
    const why = res.error ? res.error.message : reason(`${res.stdout}\n${res.stderr}`);
    say(`native addon not built (${why}); the tfjs backend will be used. Needs a C compiler, make and python3.`);
    return;
  }
  // A build that links but cannot load (a missing shared library at run time) is no better than none.
  const check = spawnSync(
    process.execPath,
    ["-e", `const i = require(${JSON.stringify(addon)}).info(); console.log(JSON.stringify(i))`],
    { encoding: "utf8", timeout: 60_000 },
  );
  if (check.status !== 0) {
    rmSync(addon, { force: true });
    say(`native addon built but does not load (${reason(check.stderr ?? "")}); the tfjs backend will be used`);
    return;
  }
  let info = {};
  try {
    info = JSON.parse(check.stdout.trim().split("\n").at(-1) ?? "{}");
  } catch {
    // the line below then names no kernel
  }
  const system = typeof info.system === "string" ? info.system.split(" ").slice(0, 2).join(" ") : undefined;
  say(
    `native addon built: matrix products on the project's own kernels (${info.kernel ?? "?"})` +
      (system ? ` and on ${system} (engine.blas chooses)` : "; no system BLAS found, none needed") +
      "; the C engine's decoder, AdamW and token draws",
  );
}

try {
  main();
} catch (e) {
  say(`native addon not built (${e instanceof Error ? e.message : String(e)}); the tfjs backend will be used`);
}
process.exit(0);
