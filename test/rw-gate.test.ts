/** The shared/exclusive gate (src/util/rw-gate.ts): who runs with whom, and in what order. */
import { test } from "node:test";
import assert from "node:assert/strict";
import { RwGate } from "../src/util/rw-gate.js";

/** A job that runs until its `finish` is called, logging its start and end. */
function job(log: string[], name: string) {
  let finish!: () => void;
  const done = new Promise<void>((r) => (finish = r));
  return {
    finish,
    run: async () => {
      log.push(`${name}+`);
      await done;
      log.push(`${name}-`);
    },
  };
}

const ticks = async (n = 5) => {
  for (let i = 0; i < n; i++) await new Promise((r) => setImmediate(r));
};

test("shared holders run together; an exclusive one waits for them and holds back the shared ones behind it", async () => {
  const g = new RwGate(),
    log: string[] = [];
  const [s1, s2, x, s3] = [job(log, "s1"), job(log, "s2"), job(log, "x"), job(log, "s3")];
  const runs = [g.shared(s1.run), g.shared(s2.run), g.exclusive(x.run), g.shared(s3.run)];
  await ticks();
  assert.deepEqual(log, ["s1+", "s2+"], "the exclusive job waits, and the shared one after it too");
  assert.deepEqual(g.state, { shared: 2, exclusive: false, waiting: 2 });
  s1.finish();
  await ticks();
  assert.deepEqual(log, ["s1+", "s2+", "s1-"]);
  s2.finish();
  await ticks();
  assert.deepEqual(log.slice(3), ["s2-", "x+"]);
  x.finish();
  await ticks();
  assert.deepEqual(log.slice(5), ["x-", "s3+"]);
  s3.finish();
  await Promise.all(runs);
  assert.deepEqual(g.state, { shared: 0, exclusive: false, waiting: 0 });
});

test("a free gate runs the job at once, and a job that throws releases it", async () => {
  const g = new RwGate();
  let ran = false;
  const p = g.exclusive(async () => {
    ran = true;
  });
  assert.equal(ran, true, "no tick before the job starts");
  await p;
  await assert.rejects(
    g.exclusive(async () => {
      throw new Error("boom");
    }),
    /boom/,
  );
  assert.equal(await g.shared(async () => 7), 7);
  assert.deepEqual(g.state, { shared: 0, exclusive: false, waiting: 0 });
});
