/** The multi-hop search task: the world generator, disjoint splits, search, the expert through the real tools, scoring, conformance. */
import { test } from "node:test";
import assert from "node:assert/strict";
import { hermesFormat } from "../src/agent/formats/hermes.js";
import { chatSetup, renderMessages } from "../src/agent/chat-setup.js";
import { finalTokens } from "../src/agent/trajectory.js";
import { DEFAULT_TYPE_MIX, typeSchedule } from "../src/tasks/multihop/type-mix.js";
import {
  buildSearchIndex,
  createMultihopTask,
  QUESTION_TYPES,
  searchText,
  searchTool,
  type Entity,
  type SplitWorld,
} from "../src/tasks/multihop/index.js";
import { calculatorTool } from "../src/tasks/calc/index.js";
import type { Split } from "../src/tasks/types.js";
import { envConformance, toolConformance, chatmlTokenizer } from "../src/testing/index.js";
import { playDemo, replayRollout } from "./task-helpers.js";

const SPLITS: Split[] = ["train", "val", "test"];
const task = createMultihopTask({ train: 180, val: 45, test: 45 });
const entities = (s: SplitWorld): Entity[] => [...s.rivers, ...s.cities, ...s.people, ...s.companies];

test("generator: deterministic for a seed; held-out splits do not depend on the train size", () => {
  const again = createMultihopTask({ train: 180, val: 45, test: 45 });
  for (const split of SPLITS) assert.deepEqual(again.rows(split), task.rows(split));
  assert.deepEqual(again.documents, task.documents);
  const other = createMultihopTask({ seed: 1, train: 180, val: 45, test: 45 });
  assert.notDeepEqual(other.rows("test"), task.rows("test"));
  assert.notDeepEqual(other.documents, task.documents);
  const small = createMultihopTask({ train: 10, val: 45, test: 45 });
  assert.deepEqual(small.rows("test"), task.rows("test"));
  assert.deepEqual(small.rows("val"), task.rows("val"));
});

test("world: unique names, relations stay inside their split, splits share no entity", () => {
  const names = SPLITS.map((s) => new Set(entities(task.world.splits[s]).map((e) => e.name)));
  const words = SPLITS.flatMap((s) =>
    entities(task.world.splits[s]).flatMap((e) =>
      e.kind === "company" ? e.name.split(" ").slice(0, 1) : e.name.split(" "),
    ),
  );
  assert.equal(new Set(words).size, words.length, "every name word is unique");
  for (let a = 0; a < 3; a++)
    for (let b = a + 1; b < 3; b++)
      assert.deepEqual(
        [...names[a]].filter((n) => names[b].has(n)),
        [],
      );
  for (const [k, split] of SPLITS.entries()) {
    const own = names[k];
    for (const e of entities(task.world.splits[split])) {
      assert.equal(e.split, split);
      const related =
        e.kind === "city"
          ? [e.river]
          : e.kind === "person"
            ? [e.birthplace]
            : e.kind === "company"
              ? [e.founder, e.hq]
              : [];
      for (const r of related) assert.ok(own.has(r), `${e.name} (${split}) points to ${r} outside its split`);
    }
  }
});

test("questions: sizes as asked, the default mix's type counts, each only about its split's entities, two searches each", () => {
  for (const [k, split] of SPLITS.entries()) {
    const qs = task.questions[split];
    assert.equal(qs.length, [180, 45, 45][k]);
    assert.equal(task.rows(split).length, qs.length);
    const counts = QUESTION_TYPES.map((t) => qs.filter((q) => q.type === t).length);
    assert.deepEqual(
      counts,
      QUESTION_TYPES.map((t) => typeSchedule(qs.length, DEFAULT_TYPE_MIX).filter((s) => s === t).length),
      `${split}: ${counts}`,
    );
    const own = new Set(entities(task.world.splits[split]).map((e) => e.name));
    for (const q of qs) {
      assert.equal(q.searches.length, 2, q.question);
      for (const s of q.searches) assert.ok(own.has(s), `${split}: '${q.question}' searches ${s}`);
      const mentioned = [...task.world.byName.keys()].filter((n) => q.question.includes(n));
      for (const n of mentioned) assert.ok(own.has(n), `${split}: '${q.question}' mentions ${n}`);
      assert.equal(q.expression !== undefined, ["years_between", "founder_age", "population_gap"].includes(q.type));
    }
  }
});

test("documents: one per entity, each stating its facts; searching a name returns its document first", () => {
  assert.equal(task.documents.length, task.world.byName.size);
  const city = task.world.splits.test.cities[0];
  const doc = task.documents.find((d) => d.id === city.name)!;
  assert.equal(
    doc.text,
    `${city.name} is a city in ${city.country}, on the ${city.river} river. It was founded in ${city.founded} and has ${city.population} people.`,
  );
  for (const d of task.documents) assert.equal(task.index.search(d.title, 2)[0]?.id, d.id, `query '${d.title}'`);
  const company = task.world.splits.val.companies[0];
  const text = searchText(task.index, company.name, 2);
  assert.equal(text.split("\n").length, 2);
  assert.ok(text.startsWith(`${company.name} is a company founded in ${company.founded} by ${company.founder}.`), text);
  assert.equal(searchText(task.index, "zzzz qqqq", 2), "No results for 'zzzz qqqq'.");
});

test("search over any document list: titles are shown when the text does not start with them", () => {
  const index = buildSearchIndex([
    { id: "1", title: "Kalomi", text: "A river town founded by Ada Brenn in 1871." },
    { id: "2", title: "Ada Brenn", text: "Ada Brenn (1840-1902) was born in Lusk." },
    { id: "3", title: "Lusk", text: "Lusk is a village on the Orra river." },
  ]);
  assert.equal(searchText(index, "Kalomi", 1), "Kalomi: A river town founded by Ada Brenn in 1871.");
  assert.equal(searchText(index, "Ada Brenn", 1), "Ada Brenn (1840-1902) was born in Lusk.");
  assert.equal(searchText(index, "Lusk village", 1, 20), "Lusk is a village...");
  assert.throws(
    () =>
      buildSearchIndex([
        { id: "1", title: "a", text: "" },
        { id: "1", title: "b", text: "" },
      ]),
    /two documents have id '1'/,
  );
  assert.throws(() => searchTool(index, 0), /k must be a positive integer/);
});

test("the expert (quality 1) answers every question through the real tools with reward 1", async () => {
  for (const split of SPLITS) {
    const rows = task.rows(split);
    const demos = task.demonstrations(rows, { seed: 0, quality: 1 });
    for (const [i, row] of rows.entries()) {
      const q = task.questions[split][i];
      const played = await playDemo(task, row, demos[i]);
      assert.deepEqual(
        [played.done, played.reward, played.toolCalls],
        [true, 1, q.expression ? 3 : 2],
        `${split} ${i}: ${q.question}`,
      );
      // The facts it answers from are in what the search tool returned.
      if (q.expression)
        for (const n of q.expression.split(" - "))
          assert.ok(played.toolText.includes(n), `${q.question}: ${n} not found`);
      else assert.ok(played.toolText.includes(q.answer), `${q.question}: ${q.answer} not found`);
    }
  }
});

test("demonstrations: deterministic for a seed; quality mixes in blind guesses and one-search guesses", async () => {
  const rows = task.rows("train");
  assert.deepEqual(
    task.demonstrations(rows, { seed: 5, quality: 0.5 }),
    task.demonstrations(rows, { seed: 5, quality: 0.5 }),
  );
  assert.notDeepEqual(
    task.demonstrations(rows, { seed: 5, quality: 0.5 }),
    task.demonstrations(rows, { seed: 6, quality: 0.5 }),
  );
  const bad = task.demonstrations(rows, { seed: 0, quality: 0 });
  const searches = bad.map((d) => d.filter((m) => m.role === "tool").length);
  assert.ok(
    searches.every((n) => n <= 1),
    "a careless demonstration searches at most once",
  );
  const blind = searches.filter((n) => n === 0).length;
  assert.ok(blind > 60 && blind < 120, `${blind} of 180 answer without searching`);
  const rewards = await Promise.all(rows.map(async (r, i) => (await playDemo(task, r, bad[i])).reward));
  const solved = rewards.filter((r) => r === 1).length;
  assert.ok(solved < 40, `quality 0 still solves ${solved} of 180 (only lucky comparison guesses should)`);
  const mixed = task.demonstrations(rows, { seed: 0, quality: 0.7 });
  const full = mixed.filter(
    (d, i) => d.filter((m) => m.role === "tool").length === (task.questions.train[i].expression ? 3 : 2),
  ).length;
  assert.ok(full > 0.6 * 180 && full < 0.8 * 180, `quality 0.7: ${full} of 180 full solutions`);
});

test("score: a replayed expert scores 1; F1 gives partial credit; formatOk follows the last turn", async () => {
  const rows = task.rows("test").slice(0, 4);
  const demos = task.demonstrations(rows, { seed: 0, quality: 1 });
  const tok = chatmlTokenizer();
  const res = await replayRollout(task, rows, demos);
  assert.equal(res.metrics.driftMismatches, 0);
  for (const [i, t] of res.trajectories.entries()) {
    assert.deepEqual(task.score(t, rows[i], tok), { reward: 1, em: 1, f1: 1, formatOk: 1 });
    const rendered = renderMessages(chatSetup(tok), demos[i], {
      tools: task.makeEnv(rows[i]).tools,
      addGenerationPrompt: false,
    });
    assert.equal(`${tok.decode(finalTokens(t))}\n`, rendered, "the demonstration renders to the rollout's tokens");
  }
  const k = task.questions.test.slice(0, 4).findIndex((q) => q.expression === undefined);
  const gold = rows[k].reward_model.ground_truth;
  const last = demos[k].length - 1;
  const extra = demos[k].map((m, j) =>
    j === last ? { ...m, content: `<think>x</think>\n<answer>the ${gold} area</answer>` } : m,
  );
  const [t] = (await replayRollout(task, [rows[k]], [extra])).trajectories;
  // normalized: [<gold>, area] vs [<gold>]: P = 1/2, R = 1
  assert.deepEqual(task.score(t, rows[k], tok), { reward: 0.1, em: 0, f1: (2 * (1 / 2)) / (1 / 2 + 1), formatOk: 1 });
  const noThink = demos[k].map((m, j) => (j === last ? { ...m, content: `<answer>The ${gold}</answer>` } : m));
  const [u] = (await replayRollout(task, [rows[k]], [noThink])).trajectories;
  assert.deepEqual(task.score(u, rows[k], tok), { reward: 0.75, em: 1, f1: 1, formatOk: 0 });
});

toolConformance(searchTool(task.index, 2), {
  valid: [{ query: task.world.splits.test.cities[0].name }, { query: "no such place" }, { query: "!!!" }],
  invalid: [{ query: "" }, { query: 3 }, { q: "Lusk" }, { query: "x".repeat(201) }, { query: "a", k: 5 }],
});

toolConformance(calculatorTool, { valid: [{ expression: "2019 - 1871" }], invalid: [{ expression: null }] });

envConformance("multihop task env", (row) => task.makeEnv(row), {
  rows: task.rows("val").slice(0, 2),
  actions: [
    `<think>x</think>\n${hermesFormat.write({ name: "search", arguments: { query: task.world.splits.val.companies[0].name } })}`,
    [
      hermesFormat.write({ name: "search", arguments: { query: "" } }),
      hermesFormat.write({ name: "calculator", arguments: { expression: "3 - 1" } }),
    ].join("\n"),
    "<think>done</think>\n<answer>x</answer>",
  ],
});

test("hops: long-horizon questions over N cities and companies; the expert searches each and answers the earliest", async () => {
  const long = createMultihopTask({ hops: 6, train: 20, val: 8, test: 8 });
  for (const split of SPLITS) {
    const rows = long.rows(split);
    const demos = long.demonstrations(rows, { seed: 0, quality: 1 });
    const world = long.world.splits[split];
    for (const [i, row] of rows.entries()) {
      const q = long.questions[split][i];
      assert.equal(q.type, "earliest_founded");
      assert.equal(q.searches.length, 6);
      const xs = q.searches.map((n) => [...world.cities, ...world.companies].find((e) => e.name === n)!);
      assert.ok(xs.every(Boolean), `${q.question}: every entity is of the split`);
      assert.equal(new Set(xs.map((x) => x.founded)).size, 6, "founding years differ");
      assert.equal(q.answer, xs.reduce((a, b) => (b.founded < a.founded ? b : a)).name);
      const played = await playDemo(long, row, demos[i]);
      assert.deepEqual([played.done, played.reward, played.toolCalls], [true, 1, 6], `${split} ${i}: ${q.question}`);
    }
  }
  assert.deepEqual(createMultihopTask({ hops: 6, train: 20, val: 8, test: 8 }).questions, long.questions);
  assert.throws(() => createMultihopTask({ hops: 2 }), /option 'hops': /);
  assert.throws(() => createMultihopTask({ hops: 25 }), /option 'hops': /);
  assert.throws(
    () => createMultihopTask({ hops: 20, train: 1, val: 1, test: 1 }),
    /hops 20 needs 20 cities and companies in the test split's world, which has 12/,
  );
});

test("hops: a long-horizon world is sized by its mentions, so no name answers most held-out questions", () => {
  // Sized as for two-hop questions, 64 twelve-hop test questions drew 12 of 16 companies and 48 had one answer.
  for (const over of ["companies", "both"] as const) {
    const t = createMultihopTask({ hops: 12, hopsOver: over });
    for (const split of ["val", "test"] as const) {
      const counts = new Map<string, number>();
      for (const q of t.questions[split]) counts.set(q.answer, (counts.get(q.answer) ?? 0) + 1);
      assert.equal(t.world.splits[split].companies.length, (64 * 12) / 4, `${over} ${split}`);
      assert.ok(counts.size >= 24, `${over} ${split}: ${counts.size} distinct answers`);
      assert.ok(Math.max(...counts.values()) <= 8, `${over} ${split}: the most frequent answer is in at most 8 of 64`);
    }
  }
});

test("hopsOver: long-horizon questions over one kind list only that kind; a split with too few says so", () => {
  for (const over of ["cities", "companies"] as const) {
    const t = createMultihopTask({ hops: 4, hopsOver: over, train: 20, val: 8, test: 8 });
    for (const split of SPLITS) {
      const kind = t.world.splits[split][over];
      for (const q of t.questions[split]) {
        assert.ok(
          q.searches.every((n) => kind.some((e) => e.name === n)),
          `${over}, ${split}: ${q.question}`,
        );
        assert.equal(
          q.answer,
          q.searches.map((n) => kind.find((e) => e.name === n)!).reduce((a, b) => (b.founded < a.founded ? b : a)).name,
        );
      }
    }
  }
  // Over both kinds the answer is always a city (the prior hopsOver removes).
  const both = createMultihopTask({ hops: 6, train: 20, val: 8, test: 8 });
  assert.ok(both.questions.test.every((q) => both.world.splits.test.cities.some((c) => c.name === q.answer)));
  assert.throws(
    () => createMultihopTask({ hops: 12, hopsOver: "cities", train: 1, val: 1, test: 1 }),
    /hops 12 needs 12 cities in the test split's world, which has 6/,
  );
  assert.throws(() => createMultihopTask({ hops: 4, hopsOver: "towns" }), /option 'hopsOver'/);
});
