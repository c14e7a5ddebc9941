/**
 * dev/experiments/compaction-failures.ts: the failure classes of twelve-hop compaction episodes
 * (docs/compaction.md), each from a hand-written episode over three companies.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { classifyEpisode, savedEpisode, type EpisodeText } from "../dev/experiments/compaction-failures.js";

const CONTEXT = "<|im_start|>user\nWhich was founded first: Sisi Labs, Kelna Mills or Povo Works?<|im_end|>";
const found = (name: string, year: number) => ({
  query: name,
  text: `${name} is a company founded in ${year} by A B.`,
});
const SEARCHES = [found("Sisi Labs", 1956), found("Kelna Mills", 1880), found("Povo Works", 1901)];

function episode(over: Partial<EpisodeText>): EpisodeText {
  return {
    context: CONTEXT,
    actions: [
      "<think>Find when Sisi Labs was founded.</think>",
      "<think>1956 Sisi Labs. Find when Kelna Mills was founded.</think>",
      "Found: 1956 Sisi Labs, 1880 Kelna Mills.",
      "<think>1880 Kelna Mills. Find when Povo Works was founded.</think>",
      "<think>1901 Povo Works. The earliest is 1880 Kelna Mills.</think>\n<answer>Kelna Mills</answer>",
    ],
    searches: SEARCHES,
    correct: false,
    answered: true,
    ...over,
  };
}

test("a right answer is correct, an episode without one is cut off", () => {
  assert.equal(classifyEpisode(episode({ correct: true })), "correct");
  assert.equal(classifyEpisode(episode({ answered: false })), "cut-off");
});

test("a garbled query is a copy error; a search never made is a missed search", () => {
  assert.equal(
    classifyEpisode(episode({ searches: [SEARCHES[0], found("Kelna Labs", 1930), SEARCHES[2]] })),
    "query-copy",
  );
  assert.equal(classifyEpisode(episode({ searches: SEARCHES.slice(0, 2) })), "missed-search");
});

test("a ledger pair no search returned, in a note or a summary, is a ledger copy error", () => {
  const notes = episode({}).actions;
  const wrongYear = notes.map((a, i) => (i === 1 ? a.replace("1956", "1965") : a));
  assert.equal(classifyEpisode(episode({ actions: wrongYear })), "ledger-copy");
  const wrongName = notes.map((a, i) => (i === 2 ? a.replace("1880 Kelna Mills", "1880 Kelna Works") : a));
  assert.equal(classifyEpisode(episode({ actions: wrongName })), "ledger-copy");
  // A note of two companies one search returned is two pairs, both right.
  const twoNoted = notes.map((a, i) =>
    i === 3 ? a.replace("1880 Kelna Mills.", "1956 Sisi Labs, 1880 Kelna Mills.") : a,
  );
  assert.equal(classifyEpisode(episode({ actions: twoNoted })), "wrong-name");
});

test("with a right ledger, the answer's year or the name after it", () => {
  const notes = episode({}).actions;
  const answer = (text: string) => [...notes.slice(0, -1), text];
  assert.equal(
    classifyEpisode(episode({ actions: answer("<think>1901 Povo Works. The earliest is 1901 Povo Works.</think>") })),
    "wrong-year",
  );
  // The answer turn's own note (1901 Povo Works) is checked; its "earliest" pair is the answer, not a note.
  assert.equal(
    classifyEpisode(episode({ actions: answer("<think>1901 Povo Works. The earliest is 1880 Kelna Labs.</think>") })),
    "wrong-name",
  );
  // The unchanged episode answers Kelna Mills but its reward said wrong: the classes do not second-guess the reward.
  assert.equal(classifyEpisode(episode({})), "wrong-name");
});

test("a saved sample of a run with coverageReward is right only if its reward without the coverage share pays", () => {
  const call = (query: string) => ({ name: "search", arguments: { query }, text: "" });
  const saved = (reward: number, queries: string[]) => ({
    reward,
    endReason: "done",
    steps: [{ context: CONTEXT, action: "<answer>Kelna Mills</answer>", toolCalls: queries.map(call) }],
  });
  // A wrong answer (0.1 with its format) after all three searches: 0.1 + 0.5 x 1 = 0.6 would read as right.
  assert.equal(savedEpisode(saved(0.6, ["Sisi Labs", "Kelna Mills", "Povo Works"])).correct, true);
  assert.equal(savedEpisode(saved(0.6, ["Sisi Labs", "Kelna Mills", "Povo Works"]), 0.5).correct, false);
  // A right one (1) after two of three: 1 + 0.5 x 2/3.
  assert.equal(savedEpisode(saved(1 + 1 / 3, ["Sisi Labs", "Kelna Milz", "Povo Works"]), 0.5).correct, true);
  assert.deepEqual(
    savedEpisode(saved(0.6, ["Sisi Labs"]), 0.5).searches.map((s) => s.query),
    ["Sisi Labs"],
  );
});
