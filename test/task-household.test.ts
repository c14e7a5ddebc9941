/**
 * The household task: the expert solves every generated task through the real env, the generator is
 * deterministic and keeps the unseen split unseen, invalid commands change nothing and say why, Env
 * conformance, a scripted policy through AgentLoop (one segment and one datum per step, weight only on
 * the action tokens), and prompts that fit a small model's context.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { AgentLoop } from "../src/agent/agent-loop.js";
import { chatSetup, renderMessages, type AgentMessage } from "../src/agent/chat-setup.js";
import { hermesFormat } from "../src/agent/formats/hermes.js";
import { trajectoryDatums } from "../src/rl/datums.js";
import { sftDatums } from "../src/train/sft.js";
import {
  createHouseholdTask,
  expertStep,
  GOAL_KINDS,
  House,
  HouseholdEnv,
  OBJECT_KINDS,
  RECEPTACLE_KINDS,
  type HouseholdItem,
} from "../src/tasks/household/index.js";
import { getTask, TASKS } from "../src/tasks/index.js";
import type { TaskRow } from "../src/tasks/types.js";
import { Rng } from "../src/util/rng.js";
import { actionOf, chatmlTokenizer, envConformance, ScriptedEngine } from "../src/testing/index.js";

const task = createHouseholdTask({ train: 600, val: 200, test: 200 });
const SPLITS = ["train", "val", "test"] as const;

/** The action text the expert writes for a command. */
const call = (command: string, thought = "ok") =>
  `<think>${thought}</think>\n${hermesFormat.write({ name: "env_step", arguments: { command } })}`;

type PromptObs = { prompt: AgentMessage[] };
const userOf = (o: unknown) => (o as PromptObs).prompt[1].content;

test("the expert solves every generated task (1,000, all six kinds, seen and unseen) through the env within 20 steps", () => {
  let played = 0;
  for (const split of SPLITS) {
    const rows = task.rows(split);
    assert.deepEqual(
      new Set(task.items[split].map((it) => it.kind)),
      new Set(GOAL_KINDS),
      `${split} has every goal kind`,
    );
    rows.forEach((row, i) => {
      const env = new HouseholdEnv();
      env.reset(row);
      let last;
      for (let k = 0; k < 20; k++) {
        const s = expertStep(env.state, env.goalSpec);
        assert.ok(s, `${split} ${i}: the expert has a next step while the episode runs`);
        last = env.step(actionOf(call(s.command, s.thought), k));
        assert.equal(last.info.valid, true, `${split} ${i}: '${s.command}' was admissible`);
        if (last.done) break;
      }
      assert.deepEqual(
        [last!.done, last!.reward, last!.info.success],
        [true, 1, true],
        `${split} ${i}: ${row.extra_info.task}`,
      );
      played++;
    });
  }
  assert.equal(played, 1000);
});

test("the generator is deterministic for a seed, and the held-out splits do not depend on the train size", () => {
  const again = createHouseholdTask({ train: 600, val: 200, test: 200 });
  for (const split of SPLITS) assert.deepEqual(again.rows(split), task.rows(split));
  const other = createHouseholdTask({ seed: 1, train: 20, val: 20, test: 20 });
  assert.notDeepEqual(other.rows("test"), task.rows("test").slice(0, 20));
  const small = createHouseholdTask({ train: 5, val: 200, test: 200 });
  assert.deepEqual([small.rows("val"), small.rows("test")], [task.rows("val"), task.rows("test")]);
});

test("no emitted task is unsolvable: the goal does not hold at the start, and the stored expert plan reaches it within the limit", () => {
  for (const split of SPLITS)
    for (const it of task.items[split]) {
      const h = new House(it.world);
      assert.equal(expertStep(h, it.goal) !== undefined, true, "the goal does not hold at the start");
      assert.ok(it.expert.length > 0 && it.expert.length <= 20);
      for (const c of it.expert) h.execute(c);
      assert.equal(expertStep(h, it.goal), undefined, `${it.task}: the plan reaches the goal`);
    }
});

test("unseen: test worlds share no receptacle, object name or layout with train and val (only the core appliances and tools)", () => {
  const core = new Set([...RECEPTACLE_KINDS, ...OBJECT_KINDS].filter((k) => k.part === "core").map((k) => k.name));
  const names = (items: HouseholdItem[]) => {
    const out = new Set<string>();
    for (const it of items) {
      for (const r of it.world.rooms.flatMap((room) => room.receptacles)) out.add(r.replace(/ \d+$/, ""));
      for (const o of [...it.world.objects, ...it.world.lamps]) out.add(o.id.replace(/ \d+$/, ""));
    }
    return out;
  };
  const seen = names([...task.items.train, ...task.items.val]);
  const unseen = names(task.items.test);
  const shared = [...unseen].filter((n) => seen.has(n));
  assert.deepEqual(
    shared.filter((n) => !core.has(n)),
    [],
    "only core names are shared",
  );
  for (const it of task.items.test) {
    assert.ok(!seen.has(it.goal.object), `test goal object ${it.goal.object} is unseen`);
    if (it.goal.target) assert.ok(!seen.has(it.goal.target), `test target ${it.goal.target} is unseen`);
  }
  const trainLayouts = new Set(task.items.train.map((it) => it.layout));
  assert.ok(
    task.items.test.every((it) => !trainLayouts.has(it.layout)),
    "no test layout is a train layout",
  );
  assert.ok(
    task.items.val.every((it) => trainLayouts.has(it.layout)),
    "val reuses the seen layouts",
  );
  assert.ok(new Set(task.items.test.map((it) => it.layout)).size > 1);
  const rowsOfTest = task.rows("test");
  assert.ok(rowsOfTest.every((r) => r.extra_info.unseen === true));
  assert.ok(task.rows("val").every((r) => r.extra_info.unseen === false));
  // A train task and a val task are never the same task (the same opening prompt may hide other placements).
  const key = (r: TaskRow) => JSON.stringify(r.extra_info.household);
  const trainKeys = new Set(task.rows("train").map(key));
  assert.ok(task.rows("val").every((r) => !trainKeys.has(key(r))));
});

test("invalid commands, malformed calls and missing calls change nothing and say why", () => {
  const row = task.rows("train").find((r) => r.extra_info.kind === "heat_and_place")!;
  const env = new HouseholdEnv();
  const first = env.reset(row);
  const start = env.stateText();
  const fridge = "fridge 1";
  const cases: [string, RegExp, RegExp][] = [
    [
      call(`open ${fridge}`),
      /"open fridge 1" is not admissible: you are not at fridge 1 \(you are in the middle of the house\); go to it first/,
      /\[Action 1\] open fridge 1 \(invalid\)/,
    ],
    [
      call("fly to the moon"),
      /"fly to the moon" is not admissible: it is not a command of this world/,
      /\[Action 2\] fly to the moon \(invalid\)/,
    ],
    [
      "I will just think.",
      /Your last reply was invalid: there was no tool call/,
      /\[Action 3\] no tool call \(invalid\)/,
    ],
    [
      '<tool_call>{"name": "env_step", "arguments": </tool_call>',
      /the tool call could not be read: malformed JSON/,
      /\[Action 4\] malformed tool call \(invalid\)/,
    ],
    [
      hermesFormat.write({ name: "search", arguments: { query: "x" } }),
      /there is no tool "search"; the only tool is env_step/,
      /\[Action 5\] call to an unknown tool \(invalid\)/,
    ],
    [
      hermesFormat.write({ name: "env_step", arguments: { cmd: "look" } }),
      /env_step takes \{"command"/,
      /\[Action 6\] env_step with bad arguments \(invalid\)/,
    ],
  ];
  for (const [k, [text, why, mark]] of cases.entries()) {
    const r = env.step(actionOf(text, k));
    assert.deepEqual([r.reward, r.done, r.info.valid, r.info.step], [0, false, false, k]);
    assert.match(userOf(r.observation), why);
    assert.match(userOf(r.observation), /Nothing changed\./);
    assert.match(userOf(r.observation), mark);
    assert.equal(r.info.state, start, "the state the action was taken in");
    assert.equal(env.stateText(), start, "nothing changed");
  }
  assert.equal(env.state.at, null);
  // Only the first call counts: a valid second call after an invalid first one does nothing.
  const r = env.step(actionOf(`${call("open fridge 1")}\n${call(`go to ${fridge}`)}`, 6));
  assert.equal(r.info.valid, false);
  assert.equal(env.state.at, null);
  // Case and spacing are forgiven; the history shows the command as read.
  const ok = env.step(actionOf(call(`Go to  Fridge 1.`), 7));
  assert.equal(ok.info.valid, true);
  assert.equal(env.state.at, fridge);
  assert.match(
    userOf(ok.observation),
    /\[Action 8\] go to fridge 1\nObservation: You arrive at fridge 1\. The fridge 1 is closed\./,
  );
  assert.notEqual(userOf(first), userOf(ok.observation));
  // Inside-world reasons: a closed receptacle, full hands.
  const why = (command: string) => userOf(env.step(actionOf(call(command), 8)).observation);
  const inFridge = env.state.contents.get(fridge)!;
  if (inFridge.length > 0)
    assert.match(why(`take ${inFridge[0]} from ${fridge}`), /the fridge 1 is closed; open it first/);
  assert.match(why("move apple 7 to fridge 1"), /there is no apple 7 in this house|you are not carrying/);
});

test("the step limit is the env's own: 20 steps end the episode with reward 0", async () => {
  const row = task.rows("val")[0];
  const env = new HouseholdEnv();
  env.reset(row);
  for (let k = 0; k < 20; k++) {
    const r = env.step(actionOf(call("look"), k));
    assert.equal(r.done, k === 19, `step ${k}`);
    assert.equal(r.reward, 0);
  }
  assert.throws(() => env.step(actionOf(call("look"), 20)), /the episode is over/);
  // Through the loop (maxTurns above the limit): the env ends it, as "done".
  const engine = new ScriptedEngine(chatmlTokenizer(), () => `${call("inventory")}<|im_end|>`);
  const t = await new AgentLoop(engine, chatSetup(chatmlTokenizer()), { maxTurns: 50 }).run(task.makeEnv(row), row);
  assert.deepEqual([t.endReason, t.steps.length, t.reward], ["done", 20, 0]);
  assert.deepEqual(task.score(t, row, chatmlTokenizer()), { reward: 0, em: 0, f1: 0, formatOk: 1 });
});

test("invalidPenalty: each invalid step costs it, valid steps and success are unchanged; the option is checked", async () => {
  const priced = createHouseholdTask({ train: 8, val: 8, test: 8, invalidPenalty: 0.01 });
  const row = priced.rows("val")[0];
  const plan = priced.items.val[0].expert;
  const env = new HouseholdEnv();
  env.reset(row);
  const rewards = [
    env.step(actionOf("no call at all", 0)).reward,
    env.step(actionOf(call("move apple 7 to fridge 1"), 1)).reward,
    ...plan.map((c, k) => env.step(actionOf(call(c), k + 2)).reward),
  ];
  assert.deepEqual(rewards, [-0.01, -0.01, ...plan.slice(1).map(() => 0), 1]);
  // Through the loop and the task's score: the trajectory's reward is the sum, success still 1.
  const engine = new ScriptedEngine(chatmlTokenizer(), (c) => {
    const done = c.text.match(/\[Action \d+\]/g)?.length ?? 0;
    return `${done === 0 ? call("open the moon") : call(plan[done - 1])}<|im_end|>`;
  });
  const t = await new AgentLoop(engine, chatSetup(chatmlTokenizer()), { maxTurns: 20 }).run(priced.makeEnv(row), row);
  const s = priced.score(t, row, chatmlTokenizer());
  assert.deepEqual([t.reward.toFixed(2), s.em], ["0.99", 1]);
  assert.throws(() => createHouseholdTask({ invalidPenalty: 2 }), /invalidPenalty/);
});

const conformanceRow = task.rows("val")[1];
envConformance("HouseholdEnv", () => task.makeEnv(conformanceRow), {
  rows: task.rows("val").slice(0, 4),
  actions: task.items.val[1].expert.map((c) => call(c)),
});

test("a scripted policy through AgentLoop: one segment per step from its rebuilt prompt, datums weigh only the action tokens", async () => {
  const tok = chatmlTokenizer();
  const chat = chatSetup(tok);
  for (const split of ["train", "test"] as const) {
    const row = task.rows(split).find((r) => r.extra_info.kind === "pick_two_and_place")!;
    const plan = task.items[split][row.extra_info.index].expert;
    const engine = new ScriptedEngine(tok, (c) => {
      const done = c.text.match(/\[Action \d+\]/g)?.length ?? 0;
      return `${call(plan[done], `step ${done + 1}`)}<|im_end|>`;
    });
    const env = task.makeEnv(row);
    const t = await new AgentLoop(engine, chat, { maxTurns: 20 }).run(env, row);
    assert.deepEqual([t.endReason, t.reward, t.steps.length], ["done", 1, plan.length]);
    assert.deepEqual(task.score(t, row, tok), { reward: 1, em: 1, f1: 1, formatOk: 1 });
    // The prompts the env rebuilds, replayed on a fresh env.
    const replay = new HouseholdEnv();
    const prompts = [replay.reset(row).prompt];
    plan.forEach((c, k) => prompts.push((replay.step(actionOf(call(c), k)).observation as PromptObs).prompt));
    t.steps.forEach((s, k) => {
      assert.equal(s.extendsPrevious, false, `step ${k} starts its own segment`);
      assert.deepEqual(s.observation, [], "nothing is appended after the action");
      const rendered = renderMessages(chat, prompts[k], { tools: env.tools, addGenerationPrompt: true });
      assert.deepEqual(s.context, tok.encode(rendered), `step ${k}'s context is its rebuilt prompt`);
      assert.equal(s.info.step, k);
      assert.equal(s.info.command, plan[k]);
      assert.match(String(s.info.state), /^Your task is to: .*\nObservation: .*\nAdmissible commands:\n/);
    });
    assert.equal(t.drift?.firstDiff, -1);
    const { datums, steps } = trajectoryDatums(t);
    assert.equal(datums.length, t.steps.length, "one datum per step");
    datums.forEach((d, k) => {
      const n = t.steps[k].action.length;
      const ctx = t.steps[k].context!.length;
      assert.equal(d.tokens.length, ctx + n - 1);
      assert.deepEqual(d.weights.slice(0, ctx - 1), new Array(ctx - 1).fill(0), "no weight on the prompt");
      assert.deepEqual(d.weights.slice(ctx - 1), new Array(n).fill(1), "weight on every action token");
      assert.deepEqual(d.targetTokens.slice(ctx - 1), t.steps[k].action);
      assert.ok(steps[k].every((s, i) => (s === -1) === i < ctx - 1));
    });
  }
});

test("rows render with the default tokenizer's chat template within 1024 tokens, and so do the expert's prompts", () => {
  const tok = chatmlTokenizer();
  const chat = chatSetup(tok);
  const tokens = (messages: AgentMessage[]) =>
    tok.encode(renderMessages(chat, messages, { tools: task.tools, addGenerationPrompt: true })).length;
  for (const split of SPLITS)
    for (const row of task.rows(split)) {
      assert.deepEqual(
        row.prompt.map((m) => m.role),
        ["system", "user"],
      );
      const n = tokens(row.prompt);
      assert.ok(n < 1024, `${split} ${row.extra_info.index}: ${n} tokens`);
    }
  for (const split of SPLITS)
    for (const demo of task.demonstrations(task.rows(split).slice(0, 100), { seed: 0, quality: 1 })) {
      const n = tokens(demo.slice(0, 2));
      assert.ok(n + 100 < 1024, `a step prompt of ${n} tokens leaves no room for the action`);
    }
});

test("demonstrations: one [system, user, assistant] conversation per step, the env's own prompts; quality mixes in mistakes", () => {
  const rows = task.rows("train").slice(0, 60);
  const demos = task.demonstrations(rows, { seed: 0, quality: 1 });
  // The demonstrations search (they know only what was seen), so they take at least the stored plan's steps.
  assert.ok(demos.length > task.items.train.slice(0, 60).reduce((s, it) => s + it.expert.length, 0));
  // Play them: each conversation's prompt is the env's prompt at that step.
  let d = 0,
    solved = 0;
  for (const row of rows) {
    const env = new HouseholdEnv();
    let prompt = env.reset(row).prompt;
    for (let k = 0; ; k++) {
      const demo = demos[d++];
      assert.deepEqual(
        demo.map((m) => m.role),
        ["system", "user", "assistant"],
      );
      assert.deepEqual(demo.slice(0, 2), prompt);
      assert.match(
        demo[2].content,
        /^<think>[^<]+<\/think>\n<tool_call>\n\{"name": "env_step", "arguments": \{"command": "[^"]+"\}\}\n<\/tool_call>$/,
      );
      const r = env.step(actionOf(demo[2].content, k));
      assert.equal(r.info.valid, true);
      if (r.done) {
        // Searching in listing order, a few pick-two tasks need more than the 20 steps (8 of 1,000).
        assert.ok(r.reward === 1 || k === 19, `solved, or out of steps (step ${k + 1})`);
        solved += r.reward;
        break;
      }
      prompt = (r.observation as PromptObs).prompt;
    }
  }
  assert.ok(solved >= 58, `${solved} of 60 solved`);
  assert.deepEqual(
    task.demonstrations(rows, { seed: 3, quality: 0.5 }),
    task.demonstrations(rows, { seed: 3, quality: 0.5 }),
  );
  assert.notDeepEqual(
    task.demonstrations(rows, { seed: 3, quality: 0.5 }),
    task.demonstrations(rows, { seed: 4, quality: 0.5 }),
  );
  const half = task.demonstrations(rows, { seed: 0, quality: 0.5 });
  const invalid = half.filter(
    (c) => / \(invalid\)\n/.test(c[1].content) && c[1].content.includes("is not admissible"),
  ).length;
  assert.ok(half.length > demos.length && invalid > 0, `${half.length} steps, ${invalid} after a refused command`);
  assert.throws(() => task.demonstrations(rows, { seed: 0, quality: 1.5 }), /quality must be in \[0, 1\]/);
  // The warm start's SFT datums: one per step, weight on the assistant's turn.
  const datums = sftDatums(task, rows.slice(0, 5), chatmlTokenizer(), { seed: 0, quality: 1 });
  assert.equal(datums.length, task.demonstrations(rows.slice(0, 5), { seed: 0, quality: 1 }).length);
});

test("the demonstrations' expert knows only what was seen: hiding the unseen objects elsewhere changes none of its steps", () => {
  const rng = new Rng(7);
  let compared = 0,
    searches = 0;
  for (const split of ["train", "test"] as const)
    for (const row of task.rows(split).slice(0, 150)) {
      const env = new HouseholdEnv();
      env.reset(row);
      const seen = new Set<string>();
      const done: string[] = [];
      for (;;) {
        const h = env.state;
        if (h.at !== null && h.accessible(h.at)) seen.add(h.at);
        const step = expertStep(h, env.goalSpec, seen);
        if (!step) break;
        // The same house with every object the agent has not seen moved to a random unseen receptacle
        // (not one of the goal's target kind: that could meet the goal).
        const unseen = h.receptacles.filter(
          (r) => !seen.has(r) && !h.lamps().includes(r) && r.slice(0, r.lastIndexOf(" ")) !== env.goalSpec.target,
        );
        const world = structuredClone(h.world);
        const start = new House(h.world);
        for (const c of done) start.execute(c);
        world.objects = world.objects.map((o) =>
          seen.has(start.locationOf(o.id) ?? "") || start.holding === o.id || unseen.length === 0
            ? o
            : { ...o, at: unseen[rng.int(unseen.length)] },
        );
        const other = new House(world);
        for (const c of done) other.execute(c);
        assert.deepEqual(
          expertStep(other, env.goalSpec, seen),
          step,
          `${split} ${row.extra_info.index}: ${done.join("; ")}`,
        );
        compared++;
        if (step.thought.includes("I will look in")) searches++;
        done.push(step.command);
        if (env.step(actionOf(call(step.command, step.thought), done.length - 1)).done) break;
      }
    }
  assert.ok(compared > 1000 && searches > 300, `${compared} steps compared, ${searches} of them searches`);
});

test("score: success, reward and formatOk from the trajectory", async () => {
  const tok = chatmlTokenizer();
  const row = task.rows("val")[2];
  const plan = task.items.val[2].expert;
  // A first turn without a tool call, then the expert: solved, but not well formatted throughout.
  const engine = new ScriptedEngine(tok, (c) => {
    const done = c.text.match(/\[Action \d+\]/g)?.length ?? 0;
    return done === 0 ? "<think>hmm</think><|im_end|>" : `${call(plan[done - 1])}<|im_end|>`;
  });
  const t = await new AgentLoop(engine, chatSetup(tok), { maxTurns: 20 }).run(task.makeEnv(row), row);
  assert.equal(t.endReason, "done");
  assert.deepEqual(task.score(t, row, tok), { reward: 1, em: 1, f1: 1, formatOk: 0 });
  // Cut by the loop before the env's limit: not a success.
  const cut = await new AgentLoop(engine, chatSetup(tok), { maxTurns: 2 }).run(task.makeEnv(row), row);
  assert.equal(cut.endReason, "max_turns");
  assert.equal(task.score(cut, row, tok).em, 0);
});

test("registry and options: household is a task; options are checked", () => {
  assert.ok(Object.hasOwn(TASKS, "household"));
  const t = getTask("household", { train: 12, val: 6, test: 6, heatAndPlace: 0, lookAtInLight: 3 });
  assert.ok(t.rows("train").every((r) => r.extra_info.kind !== "heat_and_place"));
  assert.throws(() => getTask("household", { rooms: 3 }), /unknown option 'rooms'/);
  assert.throws(() => getTask("household", { maxSteps: 5 }), /option 'maxSteps'/);
  assert.throws(
    () =>
      getTask("household", {
        pickAndPlace: 0,
        lookAtInLight: 0,
        cleanAndPlace: 0,
        heatAndPlace: 0,
        coolAndPlace: 0,
        pickTwoAndPlace: 0,
      }),
    /at least one goal kind weight must be positive/,
  );
  const row = t.rows("test")[0];
  assert.deepEqual(JSON.parse(row.env_kwargs!).tools, ["env_step"]);
  assert.equal(row.reward_model.ground_truth, row.extra_info.task);
  assert.throws(
    () => new HouseholdEnv().reset({ ...row, extra_info: { split: "x", index: 0 } }),
    /no extra_info.household/,
  );
  const corpus = [...t.corpus()].join("\n");
  assert.match(corpus, /env_step/);
  assert.match(corpus, /Observation: You arrive at/);
});
