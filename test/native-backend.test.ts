/**
 * The addon (its matrix products against a float64 reference, their errors) and the choice of
 * backend: native where the addon loads, the fallback to tfjs and the one line it prints where it
 * does not, and the recipe's and the environment's say.
 *
 * The addon must be built for these tests: they fail when it is missing (CI builds
 * it), and skip only when AGENT_R1_NATIVE_DISABLE is set.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { LocalEngine } from "../src/engine/local/local-engine.js";
import { loadAddon } from "../src/engine/local/addon.js";
import { InputError } from "../src/util/errors.js";
import { runCli } from "../src/cli/main.js";
import { loadConfig } from "../src/train/load-config.js";
import { Rng } from "../src/util/rng.js";
import { spawnSync } from "node:child_process";
import { captureIO, cliEntry } from "./helpers.js";
import { assertClose, native, tinyModelFixture } from "./native-helpers.js";

const fx = tinyModelFixture("agent-r1-native-", 0);

test("the native addon is built and loads (set AGENT_R1_NATIVE_DISABLE to run without it)", native, () => {
  const st = loadAddon();
  assert.ok(st.ok, `the native addon did not load: ${st.ok ? "" : st.reason}`);
  const info = st.addon.info();
  assert.match(info.blas, /\S/);
});

test(
  "addon gemm: every transpose combination and indexed (broadcast) batches against a float64 reference",
  native,
  () => {
    const st = loadAddon();
    assert.ok(st.ok);
    const { addon } = st;
    const rng = new Rng(3);
    const rand = (n: number) => Float32Array.from({ length: n }, () => rng.normal());
    const m = 5,
      n = 4,
      k = 7;
    for (const ta of [false, true]) {
      for (const tb of [false, true]) {
        const a = rand(2 * m * k),
          b = rand(3 * k * n),
          c = new Float32Array(3 * m * n);
        const aIndex = Int32Array.of(1, 0, 1),
          bIndex = null; // a broadcast by index, b item by item
        addon.gemm(a, b, c, 3, m, n, k, ta, tb, aIndex, bIndex);
        const want = new Float64Array(3 * m * n);
        for (let i = 0; i < 3; i++) {
          const ao = aIndex[i] * m * k,
            bo = i * k * n;
          for (let r = 0; r < m; r++)
            for (let col = 0; col < n; col++) {
              let s = 0;
              for (let j = 0; j < k; j++)
                s += a[ao + (ta ? j * m + r : r * k + j)] * b[bo + (tb ? col * k + j : j * n + col)];
              want[(i * m + r) * n + col] = s;
            }
        }
        assertClose(c, want, 1e-5, `gemm transA=${ta} transB=${tb}`);
      }
    }
    // k = 0: an empty sum writes zeros.
    const z = new Float32Array(6).fill(7);
    addon.gemm(new Float32Array(0), new Float32Array(0), z, 1, 2, 3, 0, false, false);
    assert.deepEqual([...z], [0, 0, 0, 0, 0, 0]);
  },
);

test("addon gemm: a bad shape or a too-short array raises an error naming it", native, () => {
  const st = loadAddon();
  assert.ok(st.ok);
  const { addon } = st;
  const a = new Float32Array(12),
    b = new Float32Array(8),
    c = new Float32Array(6); // (3,4) @ (4,2)
  addon.gemm(a, b, c, 1, 3, 2, 4, false, false);
  const cases: [() => void, RegExp][] = [
    [() => addon.gemm(a, b, new Float32Array(5), 1, 3, 2, 4, false, false), /c holds 5 floats/],
    [() => addon.gemm(a, b, c, 1, 3, 2, 5, false, false), /a holds 12 floats/],
    [() => addon.gemm(a, new Float32Array(7), c, 1, 3, 2, 4, false, false), /b holds 7 floats/],
    [() => addon.gemm(a, b, c, 2, 3, 2, 4, false, false), /c holds 6 floats/],
    [() => addon.gemm(a, b, c, 1, 3, 2, 4, false, false, Int32Array.of(1)), /a holds 12 floats, too short for item 1/],
    [() => addon.gemm(a, b, c, 1, 3, 2, 4, false, false, Int32Array.of(-1)), /aIndex\[0\] = -1/],
    [() => addon.gemm(a, b, c, 1, 3, 2, 4, false, false, null, Int32Array.of(0, 0)), /bIndex has 2 entries/],
    [() => addon.gemm(a, b, c, 1, -3, 2, 4, false, false), /m must be a non-negative integer/],
    [() => addon.gemm(a, b, c, 1, 2.5, 2, 4, false, false), /m must be a non-negative integer/],
    [
      () => addon.gemm(Array.from(a) as unknown as Float32Array, b, c, 1, 3, 2, 4, false, false),
      /a must be a Float32Array/,
    ],
    [
      () => addon.gemm(a, new Float64Array(8) as unknown as Float32Array, c, 1, 3, 2, 4, false, false),
      /b must be a Float32Array/,
    ],
    [() => addon.gemm(a, b, c, 1, 3, 2, 4, 1 as unknown as boolean, false), /transA must be a boolean/],
    [() => (addon.gemm as unknown as (...x: unknown[]) => void)(a, b, c), /at least 9 arguments/],
  ];
  for (const [fn, re] of cases) assert.throws(fn, (e: unknown) => e instanceof Error && re.test(e.message), String(re));
});

/** Runs fn with env AGENT_R1_NATIVE_DISABLE=1 (the loader then reports the addon as unavailable). */
async function withoutAddon<T>(fn: () => Promise<T>): Promise<T> {
  const before = process.env.AGENT_R1_NATIVE_DISABLE;
  process.env.AGENT_R1_NATIVE_DISABLE = "1";
  try {
    return await fn();
  } finally {
    if (before === undefined) delete process.env.AGENT_R1_NATIVE_DISABLE;
    else process.env.AGENT_R1_NATIVE_DISABLE = before;
  }
}

test("without the addon: native is an error naming the reason, auto falls back and says why, the CLI prints one line once", async () => {
  await withoutAddon(async () => {
    await assert.rejects(
      () => LocalEngine.load(fx.base, { workers: 0, backend: "native" }),
      (e: unknown) =>
        e instanceof InputError &&
        /native backend is unavailable: disabled by AGENT_R1_NATIVE_DISABLE/.test((e as Error).message),
    );
    const e = await LocalEngine.load(fx.base, { workers: 0, backend: "auto" });
    try {
      assert.equal(e.backend, "tfjs");
      const stats = await e.stats();
      assert.equal(stats.backend, "tfjs");
      assert.match(stats.backendFallback ?? "", /AGENT_R1_NATIVE_DISABLE/);
    } finally {
      await e.dispose();
    }

    const input = path.join(fx.root, "score.jsonl");
    fs.writeFileSync(input, JSON.stringify({ tokens: [5, 6, 7, 8] }) + "\n");
    const first = captureIO();
    assert.equal(await runCli(["score", "--model", fx.base, "--input", input], first), 0, first.stderr.join("\n"));
    assert.equal(first.stderr.length, 1, first.stderr.join("\n"));
    assert.match(
      first.stderr[0],
      /^agent-r1: native backend unavailable \(disabled by AGENT_R1_NATIVE_DISABLE\); using tfjs$/,
    );
    assert.equal(first.stdout.length, 1);
    const second = captureIO();
    assert.equal(await runCli(["score", "--model", fx.base, "--input", input, "--backend", "auto"], second), 0);
    assert.deepEqual(second.stderr, [], "the fallback line prints once per process");

    const forced = captureIO();
    assert.equal(await runCli(["score", "--model", fx.base, "--input", input, "--backend", "native"], forced), 1);
    assert.equal(forced.stderr.length, 1);
    assert.match(forced.stderr[0], /^error: the native backend is unavailable: disabled by AGENT_R1_NATIVE_DISABLE/);
  });
});

test("without the addon, a command that fails to load its model still fails with one line (the fallback is said only after a load)", () => {
  const input = path.join(fx.root, "one.jsonl");
  fs.writeFileSync(input, JSON.stringify({ tokens: [5, 6, 7] }) + "\n");
  const missing = path.join(fx.root, "no-such-model");
  for (const args of [
    ["generate", "--model", missing, "--prompt", "hi"],
    ["score", "--model", missing, "--input", input],
    ["eval", "--model", missing, "--task", "calc"],
    ["chat", "--model", missing, "--task", "calc"],
  ]) {
    const res = spawnSync(process.execPath, [...process.execArgv, cliEntry(), ...args], {
      encoding: "utf8",
      input: "",
      env: { ...process.env, AGENT_R1_NATIVE_DISABLE: "1", AGENT_R1_DEBUG: "" },
    });
    assert.equal(res.status, 1, `${args[0]}: ${res.stderr}`);
    const lines = res.stderr.trim().split("\n");
    assert.equal(lines.length, 1, `${args[0]} printed ${lines.length} lines:\n${res.stderr}`);
    assert.match(lines[0], /^error: .*no-such-model/, args[0]);
  }
});

test("backend choice: bad values name the allowed ones; env AGENT_R1_BACKEND is the default; engine.backend in the config", async () => {
  const io = captureIO();
  assert.equal(
    await runCli(["score", "--model", fx.base, "--input", "x.jsonl", "--backend", "gpu"], io),
    2,
    "a usage error",
  );
  assert.match(io.stderr.join("\n"), /score: --backend: unknown backend 'gpu'; choose one of: auto, native, tfjs/);

  const before = process.env.AGENT_R1_BACKEND;
  process.env.AGENT_R1_BACKEND = "tfjs";
  try {
    const e = await LocalEngine.load(fx.base, { workers: 0 });
    assert.equal(e.backend, "tfjs");
    await e.dispose();
    process.env.AGENT_R1_BACKEND = "cuda";
    await assert.rejects(() => LocalEngine.load(fx.base, { workers: 0 }), /AGENT_R1_BACKEND: unknown backend 'cuda'/);
  } finally {
    if (before === undefined) delete process.env.AGENT_R1_BACKEND;
    else process.env.AGENT_R1_BACKEND = before;
  }

  assert.equal(loadConfig(undefined, ["engine.backend=tfjs"]).engine.backend, "tfjs");
  assert.equal(loadConfig(undefined, []).engine.backend, undefined);
  assert.throws(() => loadConfig(undefined, ["engine.backend=gpu"]), /engine\.backend/);
});
