/**
 * A bounded loopback load test of `agent-r1 serve` (the real CLI in a child process): 48 requests,
 * 8 in flight at a time, one in three malformed (bad JSON, wrong types, unknown model, oversized
 * body, out-of-vocabulary token ids). Every good request is answered 200 with a completion, every
 * bad one gets a 4xx OpenAI error object, and the server is still healthy at the end.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import { initModel } from "../src/model/init-model.js";
import { startServeChild, tempDir } from "./helpers.js";

type Req = { path: string; body: string; good: boolean };

function requests(n: number): Req[] {
  const bad: Omit<Req, "good">[] = [
    { path: "/v1/chat/completions", body: "{not json" },
    { path: "/v1/chat/completions", body: JSON.stringify({ messages: "hello" }) },
    {
      path: "/v1/chat/completions",
      body: JSON.stringify({ model: "no-such-model", messages: [{ role: "user", content: "hi" }] }),
    },
    { path: "/v1/completions", body: JSON.stringify({ prompt: "x".repeat(2 * 1024 * 1024) }) },
    { path: "/v1/completions", body: JSON.stringify({ prompt: [1, 2, 99_999_999], max_tokens: 2 }) },
    { path: "/v1/completions", body: JSON.stringify({ prompt: "hi", max_tokens: -3 }) },
  ];
  return Array.from({ length: n }, (_, i) => {
    if (i % 3 === 2) return { ...bad[Math.floor(i / 3) % bad.length], good: false };
    return i % 2 === 0
      ? {
          path: "/v1/chat/completions",
          body: JSON.stringify({ messages: [{ role: "user", content: `Question ${i}?` }], max_tokens: 8, seed: i }),
          good: true,
        }
      : {
          path: "/v1/completions",
          body: JSON.stringify({ prompt: [5, 6, 7, 8 + i], max_tokens: 8, logprobs: 1, seed: i }),
          good: true,
        };
  });
}

test("serve under concurrent load with malformed requests mixed in: no crash, every good request answered", async () => {
  const modelDir = join(tempDir("agent-r1-serve-load-"), "tiny");
  await initModel({ preset: "tiny", out: modelDir });
  const { line, child, stderr, exited } = await startServeChild(modelDir);
  try {
    const url = /on (http:\/\/\S+)$/.exec(line)![1];
    const all = requests(48);
    const results: { req: Req; status: number; body: any }[] = [];
    let next = 0;
    const worker = async () => {
      while (next < all.length) {
        const req = all[next++];
        const res = await fetch(url + req.path, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: req.body,
        });
        results.push({ req, status: res.status, body: await res.json() });
      }
    };
    await Promise.all(Array.from({ length: 8 }, worker));
    assert.equal(results.length, all.length);
    for (const r of results) {
      if (r.req.good) {
        assert.equal(r.status, 200, JSON.stringify(r.body));
        assert.equal(r.body.choices.length, 1);
        assert.ok(r.body.usage.completion_tokens > 0);
      } else {
        assert.ok(r.status >= 400 && r.status < 500, `${r.req.body.slice(0, 60)} → ${r.status}`);
        assert.equal(typeof r.body.error?.message, "string", JSON.stringify(r.body));
      }
    }
    assert.equal((await fetch(url + "/health")).status, 200);
  } finally {
    child.kill("SIGTERM");
    assert.equal(await exited, 0, stderr());
  }
});
