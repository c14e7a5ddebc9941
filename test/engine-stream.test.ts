/**
 * SamplingParams.onToken: every sampled token is reported as it is appended,
 * in order per sequence, with the sequence's index in the request, in-process
 * and across worker threads; without it the results do not change.
 */
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { initModel } from "../src/model/init-model.js";
import { LocalEngine } from "../src/engine/local/local-engine.js";
import { InputError } from "../src/util/errors.js";
import type { SampleResult, SamplingParams, TokenEvent } from "../src/engine/types.js";

let root: string;
let base: string;

before(async () => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), "agent-r1-stream-"));
  base = path.join(root, "tiny");
  await initModel({ preset: "tiny", out: base, seed: 0 });
});

after(() => {
  fs.rmSync(root, { recursive: true, force: true });
});

async function sampleWithEvents(
  engine: LocalEngine,
  prompt: number[],
  params: SamplingParams,
): Promise<{ res: SampleResult; events: TokenEvent[]; resolvedAfter: number }> {
  const events: TokenEvent[] = [];
  let settled = false;
  let late = 0;
  const res = await engine.sample(prompt, {
    ...params,
    onToken: (e) => {
      if (settled) late++;
      events.push(e);
    },
  });
  settled = true;
  return { res, events, resolvedAfter: late };
}

function assertEventsMatch(res: SampleResult, events: TokenEvent[]): void {
  const n = res.sequences.length;
  for (const e of events)
    assert.ok(Number.isInteger(e.index) && e.index >= 0 && e.index < n, `index ${e.index} out of [0, ${n})`);
  res.sequences.forEach((seq, i) => {
    const mine = events.filter((e) => e.index === i);
    assert.deepEqual(
      mine.map((e) => e.token),
      seq.tokens,
      `tokens of sequence ${i}`,
    );
    assert.deepEqual(
      mine.map((e) => e.logprob),
      seq.logprobs,
      `logprobs of sequence ${i}`,
    );
  });
  assert.equal(
    events.length,
    res.sequences.reduce((s, q) => s + q.tokens.length, 0),
  );
}

for (const workers of [0, 2]) {
  test(`onToken reports exactly the returned tokens, in order per index (workers: ${workers})`, async () => {
    const engine = await LocalEngine.load(base, { workers });
    try {
      const prompt = engine.tokenizer.encode("Hello world, what is 2+2?");
      for (const params of [
        { n: 3, maxTokens: 12, temperature: 1, seed: 7 },
        { n: 1, maxTokens: 10, temperature: 0 },
        { n: 2, maxTokens: 8, temperature: 1, seed: 3, stop: ["e"] as (string | number)[] },
      ]) {
        const plain = await engine.sample(prompt, params);
        const { res, events, resolvedAfter } = await sampleWithEvents(engine, prompt, params);
        assert.equal(resolvedAfter, 0, "every token arrives before sample resolves");
        if (params.seed !== undefined || params.temperature === 0)
          assert.deepEqual(res, plain, "onToken does not change the result");
        assertEventsMatch(res, events);
      }
      // Indices are global when n is split across replicas: all of 0..n-1 appear.
      const { res, events } = await sampleWithEvents(engine, prompt, { n: 3, maxTokens: 6, temperature: 1, seed: 1 });
      assert.deepEqual([...new Set(events.map((e) => e.index))].sort(), [0, 1, 2]);
      assertEventsMatch(res, events);

      await assert.rejects(engine.sample(prompt, { maxTokens: 2, onToken: 3 as unknown as () => void }), InputError);
      // A throwing callback fails its own request, and the engine keeps working.
      await assert.rejects(
        engine.sample(prompt, {
          maxTokens: 4,
          temperature: 0,
          onToken: () => {
            throw new Error("boom");
          },
        }),
        /boom/,
      );
      const after = await engine.sample(prompt, { maxTokens: 4, temperature: 0 });
      assert.equal(after.sequences.length, 1);
    } finally {
      await engine.dispose();
    }
  });
}
