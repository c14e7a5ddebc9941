/** HotpotQA JSON, GSM8K JSONL and BeIR corpora -> TaskRows and search documents, on small files written here. */
import { test } from "node:test";
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { ToolEnv } from "../src/agent/tool-env.js";
import { hermesFormat } from "../src/agent/formats/hermes.js";
import { loadBeirCorpus } from "../src/data/beir.js";
import { loadGsm8k, gsm8kFinalAnswer } from "../src/data/gsm8k.js";
import { loadHotpotQa } from "../src/data/hotpotqa.js";
import { envOutcome } from "../src/tasks/common/episode.js";
import { calcJudge, calculatorTool, CALC_SYSTEM_PROMPT } from "../src/tasks/calc/index.js";
import {
  buildSearchIndex,
  qaJudge,
  searchText,
  searchTool,
  SEARCH_SYSTEM_PROMPT,
} from "../src/tasks/multihop/index.js";
import type { TaskRow } from "../src/tasks/types.js";
import { InputError } from "../src/util/errors.js";
import { actionOf } from "../src/testing/index.js";
import { tempDir } from "./helpers.js";

const dir = tempDir("agent-r1-loaders-");
const inputError = (re: RegExp) => (e: unknown) => e instanceof InputError && re.test(e.message);
const lines = (xs: unknown[]) => xs.map((x) => (typeof x === "string" ? x : JSON.stringify(x))).join("\n");

const HOTPOT = [
  {
    _id: "5a8b57f25542995d1e6f1371",
    question: "Were Scott Derrickson and Ed Wood of the same nationality?",
    answer: "yes",
    supporting_facts: [
      ["Scott Derrickson", 0],
      ["Ed Wood", 0],
    ],
    type: "comparison",
    level: "hard",
    context: [
      ["Ed Wood", ["Edward Davis Wood Jr. was an American filmmaker.", " He made low-budget films."]],
      ["Scott Derrickson", ["Scott Derrickson is an American director."]],
    ],
  },
  { _id: "bad", question: "No answer here?", context: [] },
  {
    _id: "5a8c7595554299585d9e36b6",
    question: "Which city is the director of Sinister from?",
    answer: "Denver",
    supporting_facts: [["Scott Derrickson", 0]],
    type: "bridge",
    level: "medium",
    context: [
      ["Scott Derrickson", ["A different text for the same title."]],
      ["Denver", ["Denver is a city in Colorado."]],
    ],
  },
];

test("HotpotQA: rows in Agent-R1 format and one document per title (first text wins)", () => {
  const path = join(dir, "hotpot.json");
  writeFileSync(path, JSON.stringify(HOTPOT));
  assert.throws(() => loadHotpotQa(path), inputError(/hotpot\.json: record 2: answer: .*expected string/));
  const data = loadHotpotQa(path, { skipBadRows: true, split: "val" });
  assert.equal(data.skipped, 1);
  assert.deepEqual(data.rows[0], {
    data_source: "hotpotqa/hotpot_qa",
    agent_name: "agent_env_loop",
    prompt: [
      { role: "system", content: SEARCH_SYSTEM_PROMPT },
      { role: "user", content: HOTPOT[0].question },
    ],
    ability: "multihop_qa",
    reward_model: { style: "rule", ground_truth: "yes" },
    extra_info: {
      split: "val",
      index: 0,
      question: HOTPOT[0].question,
      answer: "yes",
      id: HOTPOT[0]._id,
      type: "comparison",
      level: "hard",
      supporting_facts: [
        ["Scott Derrickson", 0],
        ["Ed Wood", 0],
      ],
    },
    env_kwargs: JSON.stringify({ env_type: "tool", tools: ["search"], tool_format: "hermes", tools_kwargs: {} }),
  } satisfies TaskRow);
  assert.equal(data.rows[1].extra_info.index, 1, "indices count the rows kept");
  assert.deepEqual(data.documents, [
    {
      id: "Ed Wood",
      title: "Ed Wood",
      text: "Edward Davis Wood Jr. was an American filmmaker. He made low-budget films.",
    },
    { id: "Scott Derrickson", title: "Scott Derrickson", text: "Scott Derrickson is an American director." },
    { id: "Denver", title: "Denver", text: "Denver is a city in Colorado." },
  ]);
  writeFileSync(join(dir, "broken.json"), "[{");
  assert.throws(() => loadHotpotQa(join(dir, "broken.json")), inputError(/broken\.json: invalid JSON/));
  writeFileSync(join(dir, "object.json"), "{}");
  assert.throws(() => loadHotpotQa(join(dir, "object.json")), inputError(/object\.json: expected a JSON array/));
});

test("HotpotQA rows play in a ToolEnv with the search tool over their documents", async () => {
  const path = join(dir, "hotpot-ok.json");
  writeFileSync(path, JSON.stringify([HOTPOT[0], HOTPOT[2]]));
  const { rows, documents } = loadHotpotQa(path);
  const index = buildSearchIndex(documents);
  assert.equal(searchText(index, "Denver", 1), "Denver is a city in Colorado.");
  assert.equal(
    searchText(index, "Ed Wood", 1),
    "Ed Wood: Edward Davis Wood Jr. was an American filmmaker. He made low-budget films.",
  );
  const env = new ToolEnv<TaskRow>({ tools: [searchTool(index, 2)], outcomeReward: envOutcome(qaJudge) });
  env.reset(rows[1]);
  const r1 = await env.step(
    actionOf(
      `<think>Who directed Sinister?</think>\n${hermesFormat.write({ name: "search", arguments: { query: "Scott Derrickson" } })}`,
      0,
    ),
  );
  assert.equal(
    (r1.observation as { messages: { content: string }[] }).messages[0].content,
    "Scott Derrickson is an American director.",
  );
  const r2 = await env.step(actionOf("<think>He is from Denver.</think>\n<answer>Denver</answer>", 1));
  assert.deepEqual([r2.done, r2.reward], [true, 1]);
});

test("GSM8K: the ground truth is the number after the last ####, commas removed", () => {
  assert.equal(gsm8kFinalAnswer("Natalia sold 48/2 = <<48/2=24>>24 clips.\n#### 72"), "72");
  assert.equal(gsm8kFinalAnswer("a #### b\n#### 1,200"), "1200");
  assert.equal(gsm8kFinalAnswer("#### -3.5 "), "-3.5");
  assert.throws(() => gsm8kFinalAnswer("no marker"), /no '#### <number>'/);
  assert.throws(() => gsm8kFinalAnswer("#### seven"), /'#### seven' is not a number/);
  const path = join(dir, "gsm8k.jsonl");
  writeFileSync(
    path,
    lines([
      {
        question:
          "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. How many clips did Natalia sell altogether?",
        answer: "In May she sold 48/2 = <<48/2=24>>24 clips.\nAltogether 48+24 = <<48+24=72>>72 clips.\n#### 72",
      },
      { question: "Broken?", answer: "no final number" },
      "",
      { question: "How much?", answer: "#### 1,200" },
    ]),
  );
  assert.throws(() => loadGsm8k(path), inputError(/gsm8k\.jsonl: line 2: answer: no '#### <number>'/));
  const { rows, skipped } = loadGsm8k(path, { skipBadRows: true, split: "test" });
  assert.equal(skipped, 1);
  assert.deepEqual(
    rows.map((r) => [
      r.reward_model.ground_truth,
      r.extra_info.index,
      r.extra_info.split,
      r.data_source,
      r.prompt[0].content,
    ]),
    [
      ["72", 0, "test", "openai/gsm8k", CALC_SYSTEM_PROMPT],
      ["1200", 1, "test", "openai/gsm8k", CALC_SYSTEM_PROMPT],
    ],
  );
  assert.equal(rows[1].extra_info.solution, "#### 1,200");
});

test("GSM8K rows play in a ToolEnv with the calculator", async () => {
  const path = join(dir, "gsm8k-one.jsonl");
  writeFileSync(path, lines([{ question: "What is 48 + 48 / 2?", answer: "#### 72" }]));
  const [row] = loadGsm8k(path).rows;
  const env = new ToolEnv<TaskRow>({ tools: [calculatorTool], outcomeReward: envOutcome(calcJudge) });
  env.reset(row);
  const r1 = await env.step(
    actionOf(
      `<think>48 + 48 / 2</think>\n${hermesFormat.write({ name: "calculator", arguments: { expression: "48 + 48 / 2" } })}`,
      0,
    ),
  );
  assert.equal((r1.observation as { messages: { content: string }[] }).messages[0].content, "72");
  const r2 = await env.step(actionOf("<think>72.</think>\n<answer>72.0</answer>", 1));
  assert.deepEqual([r2.done, r2.reward], [true, 1]);
});

test("BeIR corpus: documents for the search index; the search tool finds a document by its entity", () => {
  const path = join(dir, "corpus.jsonl");
  writeFileSync(
    path,
    lines([
      { _id: "12", title: "Kalomi", text: "Kalomi is a river town founded by Ada Brenn in 1871.", metadata: {} },
      { _id: 13, text: "Ada Brenn (1840-1902) was born in Lusk." },
      { title: "no id", text: "x" },
      { _id: "14", title: "Lusk", text: "Lusk is a village on the Orra river." },
    ]),
  );
  assert.throws(() => loadBeirCorpus(path), inputError(/corpus\.jsonl: line 3: _id: /));
  const { rows: docs, skipped } = loadBeirCorpus(path, { skipBadRows: true });
  assert.equal(skipped, 1);
  assert.deepEqual(docs, [
    { id: "12", title: "Kalomi", text: "Kalomi is a river town founded by Ada Brenn in 1871." },
    { id: "13", title: "", text: "Ada Brenn (1840-1902) was born in Lusk." },
    { id: "14", title: "Lusk", text: "Lusk is a village on the Orra river." },
  ]);
  const index = buildSearchIndex(docs);
  assert.deepEqual(
    index.search("Lusk", 3).map((d) => d.id),
    ["14", "13"],
  );
  assert.deepEqual(
    index.search("where was Ada Brenn born", 1).map((d) => d.id),
    ["13"],
  );
});
