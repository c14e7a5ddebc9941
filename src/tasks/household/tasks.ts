/**
 * Task generation: for each split, a schedule of goal kinds (by weight),
 * then for each slot a layout from the split's pool, a goal and the objects
 * placed for it. Every emitted task is checked: the goal does not hold at
 * the start, and the expert reaches it within the step limit.
 *
 * Splits (the ALFWorld seen / unseen protocol):
 *   train, val -- "seen": layouts from one pool (`layouts` of them) built
 *                 from the core + seen vocabulary; val tasks reuse train's
 *                 layouts with their own goals and object placements.
 *   test       -- "unseen": layouts from their own pool (`unseenLayouts`),
 *                 built from the core + unseen vocabulary: no receptacle or
 *                 movable-object name of a test world appears in a train or
 *                 val world (only the core appliances and tools are shared),
 *                 so no test layout is a train layout either.
 */
import { Rng } from "../../util/rng.js";
import { GENERATION_ORDER, splitStream } from "../common/splits.js";
import type { Split } from "../types.js";
import { expertPlan } from "./expert.js";
import { goalMet, goalText, GOAL_KINDS, type Goal, type GoalKind } from "./goals.js";
import { House } from "./simulator.js";
import { kindOf, partsFor, receptacleKind, type ObjectKind, type RoomKind, type VocabPart } from "./vocab.js";
import {
  allReceptacles,
  generateLayout,
  layoutKey,
  movableKinds,
  placeObjects,
  type HouseWorld,
  type Layout,
} from "./world.js";

export interface HouseholdItem {
  kind: GoalKind;
  goal: Goal;
  /** The goal as the prompt says it. */
  task: string;
  world: HouseWorld;
  /** The layout's identity (layoutKey). */
  layout: string;
  /** The expert's commands from the start (it solves the task with them). */
  expert: string[];
}

export type KindWeights = Record<GoalKind, number>;

export interface GenerateOptions {
  seed: number;
  sizes: Record<Split, number>;
  layouts: number;
  unseenLayouts: number;
  weights: KindWeights;
  maxSteps: number;
}

/** Rooms a goal kind needs one of. */
const NEEDS: Record<GoalKind, readonly RoomKind[]> = {
  pick_and_place: ["kitchen", "bathroom", "bedroom", "livingroom"],
  look_at_in_light: ["bedroom", "livingroom"],
  clean_and_place: ["kitchen", "bathroom"],
  heat_and_place: ["kitchen"],
  cool_and_place: ["kitchen"],
  pick_two_and_place: ["kitchen", "bathroom", "bedroom", "livingroom"],
};

const CAN: Partial<Record<GoalKind, keyof ObjectKind>> = {
  look_at_in_light: "look",
  clean_and_place: "clean",
  heat_and_place: "heat",
  cool_and_place: "cool",
};

const pick = <T>(rng: Rng, xs: readonly T[]): T => xs[rng.int(xs.length)];

/**
 * The kind of each of n tasks: counts by largest remainder of n * weight / total,
 * each kind's tasks spread evenly over the sequence. Pure and deterministic.
 */
export function kindSchedule(n: number, weights: KindWeights): GoalKind[] {
  const total = GOAL_KINDS.reduce((s, k) => s + weights[k], 0);
  if (!(total > 0)) throw new RangeError("household: at least one goal kind weight must be positive");
  const exact = GOAL_KINDS.map((k) => (n * weights[k]) / total);
  const counts = exact.map(Math.floor);
  const order = exact.map((x, i) => [x - Math.floor(x), i] as const).sort((a, b) => b[0] - a[0] || a[1] - b[1]);
  for (let k = 0, left = n - counts.reduce((a, b) => a + b, 0); k < left; k++) counts[order[k][1]]++;
  const slots = GOAL_KINDS.flatMap((kind, i) =>
    Array.from({ length: counts[i] }, (_, j) => ({ kind, at: (j + 0.5) / counts[i], i })),
  );
  return slots.sort((a, b) => a.at - b.at || a.i - b.i).map((s) => s.kind);
}

/** A pool of layouts; layout i holds room kind i mod 4, so every room kind is in the pool. */
export function layoutPool(rng: Rng, parts: ReadonlySet<VocabPart>, n: number): Layout[] {
  const rooms: RoomKind[] = ["kitchen", "bathroom", "bedroom", "livingroom"];
  return Array.from({ length: n }, (_, i) => generateLayout(rng, parts, rooms[i % rooms.length]));
}

/** One task of a kind in a layout, or undefined when the draw does not fit (the caller draws again). */
export function makeTask(
  rng: Rng,
  layout: Layout,
  kind: GoalKind,
  parts: ReadonlySet<VocabPart>,
  maxSteps: number,
): HouseholdItem | undefined {
  const rooms = new Set(layout.rooms.map((r) => r.kind));
  const can = CAN[kind];
  // Goal objects come from the split's own vocabulary (the knife, a core tool, is never one).
  const objects = movableKinds(parts).filter(
    (k) =>
      k.part !== "core" &&
      (can ? k[can] === true : true) &&
      k.rooms.some((r) => rooms.has(r) && NEEDS[kind].includes(r)),
  );
  if (objects.length === 0) return undefined;
  const object = pick(rng, objects);
  const goal: Goal = { kind, object: object.name };
  let count = kind === "pick_two_and_place" ? 2 : 1;
  if (rng.next() < 0.25) count++;
  if (kind === "look_at_in_light") {
    const lamps = [
      ...(layout.lamps.length > 0 ? ["desklamp"] : []),
      ...(allReceptacles(layout).some((r) => receptacleKind(kindOf(r)).lamp) ? ["floorlamp"] : []),
    ];
    if (lamps.length === 0) return undefined;
    goal.lamp = pick(rng, lamps);
  } else {
    const targets = [...new Set(allReceptacles(layout).map(kindOf))].filter((k) => receptacleKind(k).part !== "core");
    goal.target = pick(rng, targets);
  }
  const avoid = (at: string) => kindOf(at) === goal.target;
  const world = placeObjects(rng, layout, parts, [{ kind: object, count, avoid }], 2 + rng.int(4));
  if (!world) return undefined;
  const house = new House(world);
  if (goalMet(house, goal)) return undefined;
  const plan = expertPlan(house, goal, maxSteps);
  if (!plan.solved) return undefined;
  return { kind, goal, task: goalText(goal), world, layout: layoutKey(layout), expert: plan.commands };
}

/** The tasks of every split, deterministic for the options; the held-out splits do not depend on the train size. */
export function generateHouseholdTasks(o: GenerateOptions): Record<Split, HouseholdItem[]> {
  const seenParts = partsFor(false),
    unseenParts = partsFor(true);
  const pools = {
    seen: layoutPool(new Rng(o.seed, 100), seenParts, o.layouts),
    unseen: layoutPool(new Rng(o.seed, 101), unseenParts, o.unseenLayouts),
  };
  const out = { train: [], val: [], test: [] } as Record<Split, HouseholdItem[]>;
  const taken = new Set<string>();
  for (const split of GENERATION_ORDER) {
    const rng = new Rng(o.seed, 110 + splitStream(split));
    const unseen = split === "test";
    const pool = unseen ? pools.unseen : pools.seen;
    const parts = unseen ? unseenParts : seenParts;
    for (const kind of kindSchedule(o.sizes[split], o.weights)) {
      const fits = pool.filter((l) => l.rooms.some((r) => NEEDS[kind].includes(r.kind)));
      for (let tries = 0; ; tries++) {
        if (tries > 1000) throw new Error(`internal: could not generate a ${kind} task for ${split}`);
        const item = makeTask(rng, pick(rng, fits), kind, parts, o.maxSteps);
        if (!item) continue;
        const key = `${item.layout}/${JSON.stringify(item.world.objects)}/${item.task}`;
        if (taken.has(key)) continue;
        taken.add(key);
        out[split].push(item);
        break;
      }
    }
  }
  return out;
}
