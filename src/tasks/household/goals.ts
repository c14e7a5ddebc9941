/**
 * The six goal kinds (ALFWorld's), how each reads, and when it holds.
 *   pick_and_place       "put some apple on countertop."      an apple is in a countertop
 *   look_at_in_light     "look at book under the desklamp."   holding a book, at a desklamp that is on
 *   clean_and_place      "put a clean mug in cabinet."        a clean mug is in a cabinet
 *   heat_and_place       "put a hot potato on diningtable."   a hot potato is in a diningtable
 *   cool_and_place       "put a cool tomato on shelf."        a cold tomato is in a shelf
 *   pick_two_and_place   "put two cd in drawer."              two cds are in the same drawer
 * Goals name kinds, not numbered things: any apple, any countertop.
 */
import type { House } from "./simulator.js";
import { kindOf, receptacleKind } from "./vocab.js";

export const GOAL_KINDS = [
  "pick_and_place",
  "look_at_in_light",
  "clean_and_place",
  "heat_and_place",
  "cool_and_place",
  "pick_two_and_place",
] as const;
export type GoalKind = (typeof GOAL_KINDS)[number];

export interface Goal {
  kind: GoalKind;
  /** The object kind ("apple"). */
  object: string;
  /** The receptacle kind to put it in (every kind but look_at_in_light). */
  target?: string;
  /** The lamp kind (look_at_in_light): "desklamp" or "floorlamp". */
  lamp?: string;
}

/** The condition a placed object must have. */
export const GOAL_CONDITION: Partial<Record<GoalKind, "clean" | "hot" | "cold">> = {
  clean_and_place: "clean",
  heat_and_place: "hot",
  cool_and_place: "cold",
};

/** "in" a thing with a door or a hollow; "on" a surface. */
export function preposition(receptacle: string): "in" | "on" {
  const k = receptacleKind(receptacle);
  return k.openable || k.cleans || /garbage|waste|toilet|bathtub/.test(k.name) ? "in" : "on";
}

export function goalText(g: Goal): string {
  const where = g.target ? `${preposition(g.target)} ${g.target}` : "";
  switch (g.kind) {
    case "pick_and_place":
      return `put some ${g.object} ${where}.`;
    case "look_at_in_light":
      return `look at ${g.object} under the ${g.lamp}.`;
    case "clean_and_place":
      return `put a clean ${g.object} ${where}.`;
    case "heat_and_place":
      return `put a hot ${g.object} ${where}.`;
    case "cool_and_place":
      return `put a cool ${g.object} ${where}.`;
    case "pick_two_and_place":
      return `put two ${g.object} ${where}.`;
  }
}

/** Objects of the goal's kind placed as the goal wants, per target receptacle. */
function placed(h: House, g: Goal): Map<string, string[]> {
  const out = new Map<string, string[]>();
  const cond = GOAL_CONDITION[g.kind];
  for (const r of h.receptacles) {
    if (kindOf(r) !== g.target) continue;
    const ok = h.contents.get(r)!.filter((o) => kindOf(o) === g.object && (!cond || h.condition.get(o)![cond]));
    out.set(r, ok);
  }
  return out;
}

export function goalMet(h: House, g: Goal): boolean {
  if (g.kind === "look_at_in_light") {
    if (h.holding === null || kindOf(h.holding) !== g.object || h.at === null) return false;
    return h.lamps().some((l) => kindOf(l) === g.lamp && h.lampsOn.has(l) && h.lampPlace(l) === h.at);
  }
  const need = g.kind === "pick_two_and_place" ? 2 : 1;
  return [...placed(h, g).values()].some((xs) => xs.length >= need);
}

/** How many goal objects already sit, as wanted, in the best target receptacle (for the expert). */
export function bestTarget(h: House, g: Goal): { receptacle: string; count: number } | undefined {
  let best: { receptacle: string; count: number } | undefined;
  for (const [r, xs] of placed(h, g)) if (!best || xs.length > best.count) best = { receptacle: r, count: xs.length };
  return best;
}
