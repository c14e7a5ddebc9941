/**
 * The scripted expert: plans each step from the world state. For a placing
 * goal: find an object of the goal's kind (the cheapest to reach), go to it,
 * open its receptacle if closed, take it; heat / cool / clean it at the
 * nearest appliance that does it; go to the target receptacle, open it if
 * closed, move the object there. Pick two: the same twice, into one
 * receptacle. Look at in light: take the object, go to a lamp of the asked
 * kind, turn it on. Carrying something it does not need, it puts it down
 * first. Each step comes with a short thought.
 *
 * Two ways of knowing. Without `seen` the expert knows where every object
 * is (it proves each task solvable, and plans the shortest route). With
 * `seen` (the receptacles whose insides the agent has looked at so far) it
 * knows only what it has seen: the objects in those receptacles and the
 * floor lamps the room listing shows. Needing something it has not seen, it
 * searches the unseen receptacles in the order the house lists them (for a
 * desk lamp, the surfaces), opening each closed one. The rule reads off the
 * prompt at every step: the next place is the first `go to` line of the
 * admissible commands not yet in the action history. (Searching the rooms an
 * object's kind lives in first is shorter, 8.5 steps against 10.2 on
 * average, but the room of each receptacle is in the prompt only at the
 * first step.) That is the expert the demonstrations show, since a model
 * reads only the prompt (demos.ts keeps `seen` as the episode goes).
 */
import { admissibleCommands } from "./admissible.js";
import { bestTarget, goalMet, GOAL_CONDITION, preposition, type Goal } from "./goals.js";
import type { House } from "./simulator.js";
import { kindOf, objectKind, receptacleKind, withArticle } from "./vocab.js";
import { isSurface } from "./world.js";

export interface ExpertStep {
  command: string;
  thought: string;
}

/** Steps to reach a receptacle and see inside: 0 here and open, +1 to go, +1 to open. */
function reachCost(h: House, r: string): number {
  return (h.at === r ? 0 : 1) + (h.accessible(r) ? 0 : 1);
}

function cheapest(h: House, places: string[]): string | undefined {
  let best: string | undefined;
  for (const r of places) if (best === undefined || reachCost(h, r) < reachCost(h, best)) best = r;
  return best;
}

/** The next command toward getting to receptacle `r` with its inside reachable, or undefined when there. */
function approach(h: House, r: string, why: string): ExpertStep | undefined {
  if (h.at !== r) return { command: `go to ${r}`, thought: why };
  if (!h.accessible(r)) return { command: `open ${r}`, thought: `The ${r} is closed, so I open it.` };
  return undefined;
}

/** What the expert knows of the house: everything, or the receptacles it has looked into. */
type Knowing = ReadonlySet<string> | undefined;

const knownPlace = (seen: Knowing, r: string | undefined) => r !== undefined && (seen === undefined || seen.has(r));

/** Unseen receptacles that may hold a thing of `kind`, in the house's listing order (a desk lamp: surfaces only). */
function searchPlaces(h: House, seen: ReadonlySet<string>, kind: string): string[] {
  const lamp = objectKind(kind).lamp;
  return h.receptacles.filter((r) => !seen.has(r) && (lamp ? isSurface(r) : !receptacleKind(kindOf(r)).lamp));
}

/** The next search step for a thing of `kind` nobody has seen yet. */
function search(h: House, seen: ReadonlySet<string>, kind: string, what: string): ExpertStep {
  const place = searchPlaces(h, seen, kind)[0];
  if (place === undefined) throw new Error(`internal: nowhere left to look for ${what}`);
  return approach(h, place, `I need ${what}. I will look in the ${place}.`)!;
}

function fetch(h: House, seen: Knowing, wanted: string[], what: string): ExpertStep {
  const candidates = wanted.filter((o) => knownPlace(seen, h.locationOf(o)));
  if (candidates.length === 0) return search(h, seen!, kindOf(wanted[0]), what);
  const places = candidates.map((o) => h.locationOf(o)!);
  const place = cheapest(h, places)!;
  const object = candidates[places.indexOf(place)];
  return (
    approach(h, place, `I need ${what}. I will look in the ${place}.`) ?? {
      command: `take ${object} from ${place}`,
      thought: `I take the ${object}.`,
    }
  );
}

/** Puts down what is carried: here if possible, else at the nearest receptacle that holds things. */
function putDown(h: House): ExpertStep {
  const held = h.holding!;
  const canHold = (r: string) => !receptacleKind(kindOf(r)).lamp;
  if (h.at !== null && canHold(h.at) && h.accessible(h.at))
    return { command: `move ${held} to ${h.at}`, thought: `I do not need the ${held}; I put it down.` };
  const place = cheapest(h, h.receptacles.filter(canHold))!;
  return approach(h, place, `I do not need the ${held}; I go to put it down.`)!;
}

/** The expert's next step, or undefined when the goal already holds; `seen`: see the header. */
export function expertStep(h: House, g: Goal, seen?: ReadonlySet<string>): ExpertStep | undefined {
  if (goalMet(h, g)) return undefined;
  const ofKind = (o: string) => kindOf(o) === g.object;
  const holdingGoal = h.holding !== null && ofKind(h.holding);
  const article = withArticle(g.object).split(" ")[0];
  if (g.kind === "look_at_in_light") {
    if (h.holding !== null && !holdingGoal) return putDown(h);
    if (!holdingGoal) return fetch(h, seen, h.objects().filter(ofKind), `${article} ${g.object}`);
    const lamps = h
      .lamps()
      .filter((l) => kindOf(l) === g.lamp && (h.isReceptacle(l) || knownPlace(seen, h.lampPlace(l))));
    if (lamps.length === 0) return search(h, seen!, g.lamp!, `a ${g.lamp}`);
    const place = cheapest(
      h,
      lamps.map((l) => h.lampPlace(l)!),
    )!;
    const lamp = lamps.find((l) => h.lampPlace(l) === place)!;
    if (h.at !== place) return { command: `go to ${place}`, thought: `I bring the ${h.holding} to the ${lamp}.` };
    return { command: `use ${lamp}`, thought: `I turn on the ${lamp} to look at the ${h.holding}.` };
  }
  const best = bestTarget(h, g)!;
  const targets = h.receptacles.filter((r) => kindOf(r) === g.target);
  const target = g.kind === "pick_two_and_place" && best.count > 0 ? best.receptacle : cheapest(h, targets)!;
  if (h.holding !== null && !holdingGoal) return putDown(h);
  if (!holdingGoal) {
    const inTarget = new Set(g.kind === "pick_two_and_place" ? h.contents.get(target)! : []);
    const what = g.kind === "pick_two_and_place" && best.count > 0 ? `another ${g.object}` : `${article} ${g.object}`;
    return fetch(
      h,
      seen,
      h.objects().filter((o) => ofKind(o) && o !== h.holding && !inTarget.has(o)),
      what,
    );
  }
  const held = h.holding!;
  const cond = GOAL_CONDITION[g.kind];
  if (cond && !h.condition.get(held)![cond]) {
    const verb = { clean: "clean", hot: "heat", cold: "cool" }[cond];
    const does = { clean: "cleans", hot: "heats", cold: "cools" } as const;
    const appliances = h.receptacles.filter((r) => receptacleKind(kindOf(r))[does[cond]]);
    const at = appliances.includes(h.at ?? "") ? h.at! : appliances[0];
    if (h.at !== at) return { command: `go to ${at}`, thought: `I need to ${verb} the ${held}; I go to the ${at}.` };
    return { command: `${verb} ${held} with ${at}`, thought: `I ${verb} the ${held} with the ${at}.` };
  }
  return (
    approach(h, target, `Now I bring the ${held} to the ${target}.`) ?? {
      command: `move ${held} to ${target}`,
      thought: `I put the ${held} ${preposition(g.target!)} the ${target}.`,
    }
  );
}

/** Plays the expert on a copy of the house: its commands, and whether the goal held within `maxSteps`. */
export function expertPlan(start: House, g: Goal, maxSteps: number): { commands: string[]; solved: boolean } {
  const h = start.clone();
  const commands: string[] = [];
  while (commands.length < maxSteps) {
    const s = expertStep(h, g);
    if (!s) break;
    if (!admissibleCommands(h).includes(s.command))
      throw new Error(`internal: the expert chose '${s.command}', which is not admissible`);
    h.execute(s.command);
    commands.push(s.command);
  }
  return { commands, solved: goalMet(h, g) };
}
