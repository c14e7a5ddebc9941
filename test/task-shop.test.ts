/**
 * The web shop task: the generator (deterministic, disjoint targets, distractors), the expert on 1,000
 * instructions, the expert deciding from the pages alone (never from the target id; hand-built shops),
 * the purchase score against hand-worked examples, pages and actions, invalid actions,
 * the 15-step limit, Env conformance, a scripted policy through AgentLoop (one segment per step), and
 * prompt sizes under the default tokenizer.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { AgentLoop } from "../src/agent/agent-loop.js";
import { chatSetup, renderMessages } from "../src/agent/chat-setup.js";
import type { Action } from "../src/agent/env.js";
import { defaultTokenizerDir } from "../src/model/default-tokenizer.js";
import { Tokenizer } from "../src/model/tokenizer.js";
import { trajectoryDatums } from "../src/rl/datums.js";
import {
  ATTRIBUTES,
  createShopTask,
  expertScore,
  expertSteps,
  hasDistractor,
  goalQuery,
  makeGoal,
  MAX_STEPS,
  optionPhrase,
  scorePurchase,
  ShopSim,
  shopTurn,
  SHOP_MISTAKES,
  typeFactor,
  type Catalogue,
  type ExpertStep,
  type Goal,
  type Product,
  type ShopTask,
} from "../src/tasks/shop/index.js";
import { shuffle } from "../src/tasks/common/splits.js";
import { getTask } from "../src/tasks/index.js";
import type { Split, TaskRow } from "../src/tasks/types.js";
import { envConformance, ScriptedEngine } from "../src/testing/index.js";
import { Rng } from "../src/util/rng.js";

const SPLITS: Split[] = ["train", "val", "test"];
const big = createShopTask({ train: 872, val: 64, test: 64 });
const small = createShopTask({ train: 40, val: 8, test: 8 });
const act = (text: string, turn = 0): Action => ({ text, tokens: [], logprobs: [], stopReason: "stop", turn });
const call = (command: string) => shopTurn({ thought: "x", command }).content;
const promptOf = (o: unknown) => (o as { prompt: { role: string; content: string }[] }).prompt;

/** Plays the expert's steps on a fresh env: the last step's result and the number of steps. */
function playExpert(task: ShopTask, row: TaskRow) {
  const env = task.makeEnv(row);
  env.reset(row);
  const steps = task.expert(row);
  let last;
  for (const [i, s] of steps.entries()) {
    last = env.step(act(shopTurn(s).content, i));
    assert.equal(last.info.valid, true, `${row.extra_info.question}: ${s.command}: ${String(last.info.error)}`);
    if (last.done) return { last, steps: i + 1 };
  }
  return { last, steps: steps.length };
}

test("generator: 1,000 instructions; deterministic; held-out splits do not depend on the train size; targets disjoint", () => {
  assert.equal(
    SPLITS.reduce((n, s) => n + big.rows(s).length, 0),
    1000,
  );
  const again = createShopTask({ train: 872, val: 64, test: 64 });
  for (const s of SPLITS) assert.deepEqual(again.rows(s), big.rows(s));
  const fewer = createShopTask({ train: 5, val: 64, test: 64 });
  assert.deepEqual(fewer.rows("test"), big.rows("test"));
  assert.deepEqual(fewer.rows("val"), big.rows("val"));
  assert.notDeepEqual(
    createShopTask({ seed: 1, train: 5, val: 5, test: 5 }).rows("test"),
    fewer.rows("test").slice(0, 5),
  );
  const targets = SPLITS.flatMap((s) => big.goals[s].map((g) => g.target));
  assert.equal(new Set(targets).size, targets.length, "no two instructions share a target product");
  for (const s of SPLITS)
    for (const [i, row] of big.rows(s).entries()) {
      const g = big.goals[s][i];
      assert.equal(row.extra_info.question, g.instruction);
      assert.deepEqual(JSON.parse(row.reward_model.ground_truth), g);
      const p = big.catalogue.byId.get(g.target)!;
      assert.equal(p.type, g.type);
      assert.ok(g.attributes.every((a) => p.attributes.includes(a)));
      assert.ok(Object.entries(g.options).every(([k, v]) => p.options[k].includes(v)));
      assert.ok(p.price < g.budget);
      assert.ok(p.title.startsWith(p.brand) && p.title.endsWith(p.type));
      assert.ok(hasDistractor(g, big.catalogue, big.search.search(goalQuery(g))), "a distractor is in the results");
    }
});

test("generator: a candidate is kept only if the visible expert buys with score 1 within 15 steps and a distractor is listed", () => {
  const kept = new Set(SPLITS.flatMap((s) => big.goals[s].map((g) => g.target)));
  const order = shuffle(new Rng(0, 201), big.catalogue.products.slice());
  const tried = order.slice(0, Math.max(...[...kept].map((id) => order.findIndex((p) => p.id === id))) + 1);
  const dropped: Goal[] = [];
  for (const p of tried) {
    const goal = makeGoal(new Rng(0, 300_000 + Number(p.id.slice(1))), p);
    const ok =
      expertScore(goal, big.catalogue, big.search) === 1 &&
      hasDistractor(goal, big.catalogue, big.search.search(goalQuery(goal)));
    assert.equal(kept.has(p.id), ok, goal.instruction);
    if (!ok) dropped.push(goal);
  }
  // With seed 0, 22 of the first 1,022 candidates are dropped, each because the walk passes the step limit.
  assert.equal(tried.length, 1022);
  assert.equal(dropped.length, 22);
  for (const g of dropped) assert.ok(expertSteps(g, big.catalogue, big.search)!.length > MAX_STEPS, g.instruction);
});

test("the expert scores 1 on every one of 1,000 instructions within 15 steps", () => {
  let n = 0;
  for (const s of SPLITS)
    for (const row of big.rows(s)) {
      const { last, steps } = playExpert(big, row);
      assert.ok(last?.done, row.extra_info.question);
      assert.ok(steps <= MAX_STEPS);
      assert.equal(last!.reward, 1);
      assert.equal(last!.info.success, true);
      n++;
    }
  assert.equal(n, 1000);
});

/** The current page of a prompt's user message, as lines. */
const pageLines = (user: string) => /\nCurrent page:\n([\s\S]*?)\n\nAvailable actions:/.exec(user)![1].split("\n");

/**
 * Whether a results line ("P1234 Brand attr attr type $12"), read as text, shows the goal's type, every wanted
 * attribute and a price under the budget (the two words-or-phrases before the type are attributes of its category).
 */
function lineMeets(g: Goal, line: string): boolean {
  const m = /^P\d{4} \S+ (.+) \$(\d+)$/.exec(line);
  if (!m || Number(m[2]) >= g.budget) return false;
  const pool = ATTRIBUTES[g.category];
  return pool.some((a) =>
    pool.some((b) => m[1] === `${a} ${b} ${g.type}` && g.attributes.every((x) => x === a || x === b)),
  );
}

/** The option values an item page offers, by kind, read from its lines ("color: red, [gray]"). */
function offeredOnPage(lines: string[]): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  for (const l of lines.slice(2, -1)) {
    const [kind, values] = l.split(": ");
    out[kind] = values.split(", ").map((v) => v.replace(/^\[(.*)\]$/, "$1"));
  }
  return out;
}

test("the expert decides from the pages alone: first visible match, back when a value is missing, target id unused", () => {
  let notTarget = 0,
    backs = 0;
  for (const s of SPLITS)
    for (const [i, row] of big.rows(s).entries()) {
      const g = big.goals[s][i];
      const steps = big.expert(row);
      for (const mode of ["expert", ...SHOP_MISTAKES] as const)
        assert.deepEqual(
          expertSteps({ ...g, target: "P0000" }, big.catalogue, big.search, mode),
          expertSteps(g, big.catalogue, big.search, mode),
          `${g.instruction} (${mode}): the steps do not depend on the target id`,
        );
      const env = big.makeEnv(row);
      let user = promptOf(env.reset(row))[1].content;
      const rejected = new Set<string>();
      let opened = "";
      for (const [t, step] of steps.entries()) {
        const lines = pageLines(user);
        const id = /^click\[(P\d{4})\]$/.exec(step.command)?.[1];
        if (id) {
          const listed = lines.filter((l) => /^P\d{4} /.test(l));
          const line = listed.find((l) => l.startsWith(`${id} `))!;
          assert.ok(lineMeets(g, line), `${g.instruction}: opened ${line}`);
          const first = listed.find((l) => !rejected.has(l.slice(0, 5)) && lineMeets(g, l));
          assert.equal(line, first, `${g.instruction}: the first visible match not rejected yet`);
          opened = id;
        } else if (step.command === "click[< Prev]") {
          const offered = offeredOnPage(lines);
          const missing = Object.entries(g.options).filter(([k, v]) => !offered[k].includes(v));
          assert.ok(missing.length > 0, `${g.instruction}: ${opened} offers every wanted value`);
          for (const [k, v] of missing) assert.ok(step.thought.includes(`no ${optionPhrase(k, v)}`), step.thought);
          rejected.add(opened);
          backs++;
        } else if (step.command === "click[Buy Now]")
          for (const v of Object.values(g.options)) assert.ok(lines.join("\n").includes(`[${v}]`), `${v} chosen`);
        const r = env.step(act(shopTurn(step).content, t));
        assert.equal(r.info.valid, true);
        user = promptOf(r.observation)[1].content;
        if (r.done) assert.equal(r.reward, 1);
      }
      if (opened !== g.target) notTarget++;
    }
  // Both paths are exercised: buying a product other than the target, and going back from a match.
  assert.ok(notTarget > 0 && backs > 0, `${notTarget} bought another product, ${backs} went back`);
});

/** A phone case (or another type) of a hand-built shop, brand Zemo. */
function handProduct(
  id: string,
  attributes: string[],
  price: number,
  options: Record<string, string[]>,
  type = "phone case",
): Product {
  return {
    id,
    category: "electronics",
    type,
    brand: "Zemo",
    attributes,
    options,
    price,
    title: `Zemo ${attributes.join(" ")} ${type}`,
    description: "A product.",
    features: [],
    reviews: [],
  };
}

/** The expert's steps on a hand-built shop whose search lists `products` in order, and what they buy. */
function handShop(products: Product[], mode: "expert" | (typeof SHOP_MISTAKES)[number] = "expert") {
  const catalogue: Catalogue = { products, byId: new Map(products.map((p) => [p.id, p])) };
  const search = { search: () => products.map((p) => p.id) };
  const steps = expertSteps(HAND_GOAL, catalogue, search, mode);
  const sim = new ShopSim(catalogue, search, HAND_GOAL);
  const results = (steps ?? []).map((s) => sim.act(s.command));
  assert.ok(results.every((r) => r.ok));
  const last = results[results.length - 1];
  return { steps, bought: last?.ok ? last.bought : undefined };
}

const HAND_GOAL: Goal = {
  target: "P1009",
  category: "electronics",
  type: "phone case",
  attributes: ["lightweight"],
  options: { color: "gray", pack: "2 pack" },
  budget: 40,
  instruction: "i need a lightweight phone case, color gray, 2 pack, price lower than 40 dollars",
};
const HAND_TARGET = handProduct("P1009", ["compact", "lightweight"], 30, {
  color: ["black", "gray"],
  pack: ["1 pack", "2 pack"],
});
/** Listed lines that fail the instruction: another type, no wanted attribute, over the budget (twice). */
const HAND_MISSES = [
  handProduct("P1001", ["lightweight", "compact"], 30, { color: ["gray"] }, "wireless speaker"),
  handProduct("P1002", ["durable", "slim"], 20, { color: ["gray"], pack: ["2 pack"] }),
  handProduct("P1003", ["lightweight", "slim"], 40, { color: ["gray"], pack: ["2 pack"] }),
  handProduct("P1004", ["fast charging", "lightweight"], 45, { color: ["gray"], pack: ["2 pack"] }),
];
const commands = (steps: ExpertStep[] | undefined) => steps?.map((s) => s.command);

test("hand-built shops: the expert buys the first visible match that offers the values, target or not", () => {
  // A match before the target offers both values: the expert buys it (score 1) and never opens the target.
  const other = handProduct("P1005", ["lightweight", "fast charging"], 25, {
    color: ["gray", "pink"],
    pack: ["2 pack", "3 pack"],
  });
  let { steps, bought } = handShop([...HAND_MISSES, other, HAND_TARGET]);
  assert.deepEqual(commands(steps), [
    "search[lightweight phone case]",
    "click[P1005]",
    "click[gray]",
    "click[2 pack]",
    "click[Buy Now]",
  ]);
  assert.equal(
    steps![1].thought,
    "P1005 is lightweight and fast charging phone case at $25, under 40 dollars. I will open it.",
  );
  assert.deepEqual([bought?.product, bought?.score], ["P1005", 1]);
  // The first match lacks gray: back to the results, then the next match (here the target).
  const noGray = { ...other, options: { color: ["black", "pink"], pack: ["2 pack"] } };
  ({ steps, bought } = handShop([...HAND_MISSES, noGray, HAND_TARGET]));
  assert.deepEqual(commands(steps), [
    "search[lightweight phone case]",
    "click[P1005]",
    "click[< Prev]",
    "click[P1009]",
    "click[gray]",
    "click[2 pack]",
    "click[Buy Now]",
  ]);
  assert.equal(steps![2].thought, "P1005 has no color gray. I go back to the results.");
  assert.deepEqual([bought?.product, bought?.score], ["P1009", 1]);
  // No match on the first page: next >; no match anywhere: it gives up.
  const tenMisses = Array.from({ length: 10 }, (_, i) => ({ ...HAND_MISSES[i % 4], id: `P11${i}0` }));
  ({ steps, bought } = handShop([...tenMisses, HAND_TARGET]));
  assert.deepEqual(commands(steps)?.slice(0, 3), ["search[lightweight phone case]", "click[next >]", "click[P1009]"]);
  assert.equal(bought?.score, 1);
  assert.equal(handShop([...tenMisses, noGray]).steps, undefined);
  // Mistakes: the first line that fails the instruction, or the first match bought with no option chosen.
  ({ steps, bought } = handShop([other, ...HAND_MISSES, HAND_TARGET], "first_result"));
  assert.deepEqual(commands(steps)?.slice(0, 3), ["search[lightweight phone case]", "click[P1001]", "click[gray]"]);
  assert.ok(bought!.score < 1);
  ({ steps, bought } = handShop([...HAND_MISSES, noGray, HAND_TARGET], "no_options"));
  assert.deepEqual(commands(steps), ["search[lightweight phone case]", "click[P1005]", "click[Buy Now]"]);
  assert.deepEqual([bought?.product, bought?.optionMatches], ["P1005", 0]);
});

test("score: WebShop's formula on hand-worked examples, and each type factor", () => {
  const goal: Goal = {
    target: "P1000",
    category: "beauty",
    type: "hand cream",
    attributes: ["long lasting", "vegan"],
    options: { volume: "8 ounce", scent: "lavender" },
    budget: 20,
    instruction: "i need a long lasting and vegan hand cream, 8 ounce, scent lavender, price lower than 20 dollars",
  };
  const p = { category: "beauty" as const, type: "hand cream", attributes: ["long lasting", "vegan"], price: 15 };
  const both = { volume: "8 ounce", scent: "lavender" };
  // 2 attributes + 2 options + price = 5 parts.
  assert.equal(scorePurchase(goal, p, both).score, 1);
  assert.equal(scorePurchase(goal, p, both).success, true);
  assert.equal(scorePurchase(goal, { ...p, attributes: ["long lasting", "organic"] }, both).score, 4 / 5);
  assert.equal(scorePurchase(goal, p, { volume: "8 ounce" }).score, 4 / 5, "an option not chosen does not match");
  assert.equal(scorePurchase(goal, p, { volume: "2 ounce", scent: "cedar" }).score, 3 / 5);
  assert.equal(scorePurchase(goal, { ...p, price: 20 }, both).score, 4 / 5, "price must be lower than the budget");
  const partial = scorePurchase(goal, { ...p, attributes: ["vegan", "gentle"], price: 25 }, { scent: "lavender" });
  assert.deepEqual(
    [partial.attributeMatches, partial.optionMatches, partial.priceOk, partial.typeFactor, partial.score],
    [1, 1, false, 1, 2 / 5],
  );
  assert.equal(scorePurchase(goal, { ...p, type: "face cream" }, both).score, 0.5, "same category, shared word");
  assert.equal(scorePurchase(goal, { ...p, type: "shampoo" }, both).score, 0.1, "same category, no shared word");
  assert.equal(scorePurchase(goal, { ...p, category: "grocery", type: "granola" }, both).score, 0, "other category");
  assert.equal(scorePurchase(goal, { ...p, type: "face cream" }, { scent: "lavender" }).score, 0.5 * (4 / 5));
  assert.equal(typeFactor(goal, { category: "beauty", type: "hand cream" }), 1);
  assert.equal(typeFactor({ category: "home", type: "bath towel" }, { category: "home", type: "hand towel" }), 0.5);
  assert.equal(typeFactor({ category: "home", type: "bath towel" }, { category: "home", type: "storage bin" }), 0.1);
  assert.equal(typeFactor({ category: "home", type: "bath towel" }, { category: "clothing", type: "rain jacket" }), 0);
});

test("pages and actions: search, paging, item with chosen options marked, sub-pages, back buttons, buying", () => {
  const row = small.rows("train")[0];
  const env = small.makeEnv(row);
  const first = promptOf(env.reset(row));
  assert.equal(first[0].role, "system");
  assert.match(first[0].content, /env_step/);
  assert.match(
    first[1].content,
    /^Instruction: .*\n\nCurrent page:\nHome\. .*\n\nAvailable actions: search\[<query>\]$/s,
  );
  const g = small.goals.train[0];
  const p = small.catalogue.byId.get(g.target)!;
  let r = env.step(act(call(`search[${p.type}]`)));
  assert.equal(r.info.valid, true);
  let user = promptOf(r.observation)[1].content;
  assert.match(
    user,
    new RegExp(`Results for "${p.type}", page 1 of \\d:\\n(P\\d{4} .+ \\$\\d+\\n){9}P\\d{4} .+ \\$\\d+\\n`),
  );
  assert.match(user, /Available actions: click\[<id>\], click\[next >\], click\[Back to Search\]$/);
  assert.match(user, /Last steps:\nObservation: Home\. .*\nAction: search\[/);
  r = env.step(act(call("click[next >]")));
  assert.match(promptOf(r.observation)[1].content, /page 2 of/);
  assert.match(promptOf(r.observation)[1].content, /click\[< prev\]/);
  r = env.step(act(call("click[< prev]")));
  assert.match(promptOf(r.observation)[1].content, /page 1 of/);
  const listed = /\n(P\d{4}) /.exec(promptOf(r.observation)[1].content)![1];
  r = env.step(act(call(`click[${listed.toLowerCase()}]`)));
  const item = small.catalogue.byId.get(listed)!;
  user = promptOf(r.observation)[1].content;
  assert.ok(user.includes(`[${item.id}] ${item.title}\nPrice: $${item.price} | Category: ${item.category}`));
  assert.match(
    user,
    /click\[Description\], click\[Features\], click\[Reviews\], click\[Buy Now\], click\[Back to Search\], click\[< Prev\]$/,
  );
  const [kind, values] = Object.entries(item.options)[0];
  r = env.step(act(call(`click[ ${values[1].toUpperCase()} ]`)));
  assert.ok(promptOf(r.observation)[1].content.includes(`${kind}: ${values[0]}, [${values[1]}]`));
  r = env.step(act(call("click[Reviews]")));
  user = promptOf(r.observation)[1].content;
  assert.ok(user.includes(`Reviews of ${item.id}: ${item.reviews.join(" ")}`));
  assert.match(user, /Available actions: click\[Back to Item\], click\[Back to Search\]$/);
  r = env.step(act(call("click[Back to Item]")));
  assert.ok(promptOf(r.observation)[1].content.includes(`[${values[1]}]`), "choices survive a sub-page visit");
  r = env.step(act(call("click[< Prev]")));
  assert.match(promptOf(r.observation)[1].content, /Current page:\nResults for/);
  r = env.step(act(call("click[Back to Search]")));
  assert.match(promptOf(r.observation)[1].content, /Current page:\nHome\./);
  const { last } = playExpert(small, row); // a fresh env: the walk above used 11 of the 15 steps
  assert.deepEqual([last!.done, last!.reward, last!.info.success, last!.info.score], [true, 1, true, 1]);
  const opened = small.expert(row).filter((s) => /^click\[P\d{4}\]$/.test(s.command));
  assert.equal((last!.info.bought as { product: string }).product, opened[opened.length - 1].command.slice(6, -1));
});

test("invalid and malformed actions change nothing and say why; only the first call counts", () => {
  const row = small.rows("val")[0];
  const env = small.makeEnv(row);
  env.reset(row);
  env.step(act(call(`search[${goalQuery(small.goals.val[0])}]`)));
  const before = env.state();
  const cases: [string, RegExp][] = [
    ["I will just buy it.", /no tool call/],
    ['<tool_call>{"name": "env_step", "arguments": </tool_call>', /could not be read/],
    ['<tool_call>{"name": "search", "arguments": {"query": "x"}}</tool_call>', /unknown tool 'search'/],
    ['<tool_call>{"name": "env_step", "arguments": {"cmd": "click[next >]"}}</tool_call>', /needs "command"/],
    [call("buy[P1234]"), /malformed command/],
    [call("click[next >"), /malformed command/],
    [call("click[]"), /empty/],
    [call("search[lipstick]"), /search is only available on the home page/],
    [call("click[Buy Now]"), /"Buy Now" cannot be clicked on this page/],
    [call("click[P0000]"), /cannot be clicked/],
  ];
  for (const [text, why] of cases) {
    const r = env.step(act(text));
    assert.equal(r.info.valid, false, text);
    assert.match(String(r.info.error), why, text);
    assert.equal(r.info.state, before, "the step was taken in the same state");
    assert.equal(env.state(), before, `${text}: nothing changed`);
    assert.deepEqual([r.reward, r.done], [0, false]);
    const user = promptOf(r.observation)[1].content;
    assert.ok(user.includes("Invalid action: ") && user.includes("Nothing changed."), user);
    assert.ok(!user.includes("Invalid") || user.indexOf("Invalid action") < user.indexOf("Current page:"));
  }
  assert.equal(env.state().includes("Invalid"), false, "the anchor state holds no note");
  // Two calls: the first one (next >) is taken, the second (Buy Now) is not.
  const r = env.step(act(`${call("click[next >]")}\n${call("click[Back to Search]")}`));
  assert.equal(r.info.command, "click[next >]");
  assert.match(promptOf(r.observation)[1].content, /page 2 of/);
});

test("the 15-step limit: done at step 15 with score 0 when nothing was bought", () => {
  const row = small.rows("test")[0];
  const env = small.makeEnv(row);
  env.reset(row);
  for (let i = 1; i <= MAX_STEPS; i++) {
    const r = env.step(act(call("click[nothing]"), i - 1));
    assert.equal(r.done, i === MAX_STEPS, `step ${i}`);
    if (r.done) assert.deepEqual([r.reward, r.info.score, r.info.success, r.info.bought], [0, 0, false, null]);
  }
});

envConformance("ShopEnv", (row) => small.makeEnv(row), {
  rows: small.rows("train").slice(0, 3),
  actions: small.expert(small.rows("train")[0]).map((s) => call(s.command)),
});

test("a scripted policy through AgentLoop: one segment per step, datums weigh only action tokens, score 1", async () => {
  const tok = Tokenizer.fromDir(defaultTokenizerDir());
  const chat = chatSetup(tok);
  const row = small.rows("train")[1];
  const turns = small.expert(row).map((s) => shopTurn(s).content);
  const engine = new ScriptedEngine(tok, (c) => `${turns[c.index]}<|im_end|>`);
  const env = small.makeEnv(row);
  const t = await new AgentLoop(engine, chat, { maxTurns: MAX_STEPS, maxTotalTokens: 2048 }).run(env, row);
  assert.equal(t.endReason, "done");
  assert.equal(t.steps.length, turns.length);
  // Replay on a fresh env to get each step's rebuilt prompt.
  const replay = small.makeEnv(row);
  let prompt = promptOf(replay.reset(row));
  t.steps.forEach((s, i) => {
    assert.equal(s.extendsPrevious, false, `step ${i} starts its own segment`);
    const text = renderMessages(chat, prompt, { tools: small.tools, addGenerationPrompt: true });
    assert.deepEqual(s.context, tok.encode(text), `step ${i}: the context is the rebuilt prompt`);
    assert.deepEqual(s.observation, [], "nothing is appended after the action");
    assert.equal(typeof s.info.state, "string");
    prompt = promptOf(replay.step(act(turns[i], i)).observation);
  });
  assert.equal(t.reward, 1);
  const { datums, steps } = trajectoryDatums(t);
  assert.equal(datums.length, t.steps.length, "one datum per step");
  datums.forEach((d, i) => {
    const n = t.steps[i].context!.length;
    assert.deepEqual(d.tokens, [...t.steps[i].context!, ...t.steps[i].action].slice(0, -1));
    assert.deepEqual(
      d.weights,
      d.weights.map((_, j) => (j >= n - 1 ? 1 : 0)),
      "weight 1 exactly on the action's targets",
    );
    assert.ok(steps[i].every((k, j) => k === (j >= n - 1 ? i : -1)));
  });
  assert.deepEqual(small.score(t, row, tok), { reward: 1, em: 1, f1: 1, formatOk: 1 });
  assert.deepEqual(small.score({ ...t, endReason: "max_turns" }, row, tok), { reward: 0, em: 0, f1: 0, formatOk: 1 });
});

test("demonstrations: one conversation per step, replaying to the same prompts; mistakes at rate 1 - quality", () => {
  const rows = small.rows("train");
  const demos = small.demonstrations(rows, { seed: 3, quality: 1 });
  assert.equal(
    demos.length,
    rows.reduce((n, r) => n + small.expert(r).length, 0),
  );
  let k = 0;
  for (const row of rows) {
    const env = small.makeEnv(row);
    let prompt = promptOf(env.reset(row));
    for (let i = 0; i < small.expert(row).length; i++) {
      const d = demos[k++];
      assert.deepEqual(
        d.map((m) => m.role),
        ["system", "user", "assistant"],
      );
      assert.deepEqual(d.slice(0, 2), prompt);
      assert.match(
        d[2].content,
        /^<think>[^<]+<\/think>\n<tool_call>\n\{"name": "env_step", "arguments": \{"command": ".+"\}\}\n<\/tool_call>$/,
      );
      const r = env.step(act(d[2].content, i));
      assert.equal(r.info.valid, true);
      if (r.done) assert.equal(r.reward, 1);
      prompt = promptOf(r.observation);
    }
  }
  // Mistaken demonstrations still play to a purchase, mostly below score 1.
  const bad = small.demonstrations(rows, { seed: 3, quality: 0 });
  const scores: number[] = [];
  let row = -1,
    env = small.makeEnv(rows[0]);
  for (const d of bad) {
    // Conversations come row after row; an episode's first prompt has no history.
    if (!d[1].content.includes("Last steps:")) env.reset(rows[++row]);
    const r = env.step(act(d[2].content));
    if (r.done) scores.push(r.reward);
  }
  assert.equal(scores.length, rows.length);
  assert.ok(scores.filter((s) => s < 1).length > rows.length / 2, `scores ${scores}`);
  assert.throws(() => small.demonstrations(rows, { seed: 0, quality: 2 }), /quality/);
});

test("prompts of 1,000 expert episodes (and mistaken ones) fit in 1,024 tokens of the default tokenizer", () => {
  const tok = Tokenizer.fromDir(defaultTokenizerDir());
  const chat = chatSetup(tok);
  let max = 0;
  for (const s of SPLITS)
    for (const quality of s === "train" ? [1, 0] : [1])
      for (const d of big.demonstrations(big.rows(s), { seed: 0, quality })) {
        const n = tok.encode(
          renderMessages(chat, d.slice(0, 2), { tools: big.tools, addGenerationPrompt: true }),
        ).length;
        max = Math.max(max, n);
      }
  assert.ok(max <= 1024, `longest prompt: ${max} tokens`);
});

test("the registry builds shop; options are strict; corpus gives text", () => {
  const t = getTask("shop", { train: 3, val: 2, test: 2, products: 200 });
  assert.deepEqual([t.name, t.rows("train").length, t.rows("test").length], ["shop", 3, 2]);
  assert.throws(
    () => getTask("shop", { size: 3 }),
    /unknown option 'size'; allowed options: seed, train, val, test, products/,
  );
  assert.throws(() => getTask("shop", { train: 300, val: 0, test: 0, products: 200 }), /must not exceed products/);
  const corpus = [...t.corpus()];
  assert.ok(corpus.length > 200 && corpus.every((c) => typeof c === "string" && c.length > 0));
  assert.ok(corpus.some((c) => c.includes("env_step")));
});
