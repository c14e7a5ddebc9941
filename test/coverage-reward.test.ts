/** The multi-hop task's coverage reward: the share of listed names searched by name, hand-worked, and through the env. */
import { test } from "node:test";
import assert from "node:assert/strict";
import { searchCoverage } from "../src/tasks/multihop/coverage.js";
import { createMultihopTask } from "../src/tasks/multihop/index.js";
import { actionOf } from "../src/testing/index.js";
import { playDemo } from "./task-helpers.js";

const search = (query: unknown) => ({ name: "search", arguments: { query } });

test("searchCoverage: listed names searched by name (normalized, each once) over listed names", () => {
  const listed = ["Siwen Motors", "Kisilo Mills", "Zanramar Works", "Quivo Labs"];
  assert.equal(searchCoverage(listed, []), 0);
  const calls = [
    search("siwen  motors."), // case, spacing and punctuation are normalized away
    search("Kisha Mills"), // a garbled copy counts for nothing
    search("Siwen Motors"), // the same name again counts once
    { name: "calculator", arguments: { query: "Zanramar Works" } }, // not a search
    { name: "search", arguments: null }, // arguments that did not parse
    search(42),
    search("Zanramar Works"),
  ];
  assert.equal(searchCoverage(listed, calls), 2 / 4);
  assert.equal(searchCoverage(listed, [...calls, search("Kisilo Mills"), search("Quivo Labs")]), 1);
  assert.equal(searchCoverage([], calls), 0);
});

test("coverageReward: an episode's reward is its outcome plus the weight times its coverage", async () => {
  const opts = { hops: 4, hopsOver: "companies", train: 4, val: 0, test: 0 };
  const plain = createMultihopTask(opts);
  const shaped = createMultihopTask({ ...opts, coverageReward: 0.5 });
  const row = shaped.rows("train")[0];
  const q = shaped.questions.train[0];
  const [demo] = shaped.demonstrations([row], { seed: 0, quality: 1 });
  assert.equal((await playDemo(plain, row, demo)).reward, 1);
  assert.equal((await playDemo(shaped, row, demo)).reward, 1 + 0.5); // the expert searches all four by name

  // Two of the four by name, one garbled, then a wrong answer: the plain outcome + 0.5 × 2/4.
  const call = (query: string) => `<tool_call>\n{"name": "search", "arguments": {"query": "${query}"}}\n</tool_call>`;
  const wrong = q.searches.find((n) => n !== q.answer)!;
  const actions = [call(q.searches[0]), call(`${q.searches[1]}x`), call(q.searches[2]), `<answer>${wrong}</answer>`];
  const play = async (task: typeof plain) => {
    const env = task.makeEnv(row);
    await env.reset(row);
    const rewards = [];
    for (const [turn, text] of actions.entries()) rewards.push((await env.step(actionOf(text, turn))).reward);
    return rewards;
  };
  const [before, after] = [await play(plain), await play(shaped)];
  assert.deepEqual(after.slice(0, 3), [0, 0, 0]); // the searches themselves earn nothing
  assert.ok(Math.abs(after[3] - (before[3] + 0.5 * (2 / 4))) < 1e-12, `${after[3]} against ${before[3]}`);

  assert.throws(
    () => createMultihopTask({ coverageReward: 0.5 }),
    /coverageReward applies to long-horizon questions only/,
  );
  assert.throws(() => createMultihopTask({ ...opts, coverageReward: 2 }), /option 'coverageReward'/);
});
