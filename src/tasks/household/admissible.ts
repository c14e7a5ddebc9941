/**
 * The admissible commands of a state (what the prompt lists, in a fixed
 * order: what can be done here, then examine / inventory / look, then every
 * `go to`), and why a command that is not admissible is refused.
 *   take:  hands free, the object is in the (reachable) receptacle you are at
 *   move:  carrying it, at a receptacle that is reachable and holds things
 *   open / close: at an openable receptacle, closed / open
 *   heat / cool / clean: carrying something that can be, at a receptacle that does it
 *   slice: carrying a knife, a sliceable object (not yet sliced) in the receptacle you are at
 *   use:   a lamp at your place (a desk lamp on the receptacle, or the floor lamp itself)
 */
import { House, parseCommand } from "./simulator.js";
import { kindOf, objectKind, receptacleKind } from "./vocab.js";

const PROCESS = [
  ["heat", "heats", "heat"],
  ["cool", "cools", "cool"],
  ["clean", "cleans", "clean"],
] as const;

export function admissibleCommands(h: House): string[] {
  const out: string[] = [];
  const here = h.at;
  if (here !== null) {
    const rk = receptacleKind(kindOf(here));
    const reachable = h.accessible(here);
    const things = reachable ? h.contents.get(here)! : [];
    if (h.holding === null) for (const o of things) if (!objectKind(kindOf(o)).lamp) out.push(`take ${o} from ${here}`);
    if (h.holding !== null && reachable && !rk.lamp) out.push(`move ${h.holding} to ${here}`);
    if (rk.openable) out.push(`${h.open.has(here) ? "close" : "open"} ${here}`);
    if (h.holding !== null) {
      const ok = objectKind(kindOf(h.holding));
      for (const [verb, does, can] of PROCESS) if (rk[does] && ok[can]) out.push(`${verb} ${h.holding} with ${here}`);
      if (ok.knife)
        for (const o of things)
          if (objectKind(kindOf(o)).slice && !h.condition.get(o)!.sliced) out.push(`slice ${o} with ${h.holding}`);
    }
    for (const l of h.lamps()) if (h.lampPlace(l) === here) out.push(`use ${l}`);
    out.push(`examine ${here}`);
  }
  if (h.holding !== null) out.push(`examine ${h.holding}`);
  out.push("inventory", "look");
  for (const r of h.receptacles) if (r !== here) out.push(`go to ${r}`);
  return out;
}

/** Why a (normalized) command is not admissible: one sentence, for the next observation. */
export function whyNotAdmissible(h: House, command: string): string {
  const c = parseCommand(command);
  if (!c)
    return "it is not a command of this world (commands look like 'go to cabinet 1', 'take apple 1 from cabinet 1')";
  const known = (id: string) => h.isReceptacle(id) || h.condition.has(id) || h.lamps().includes(id);
  const here = h.at === null ? "you are in the middle of the house" : `you are at ${h.at}`;
  const unknown = (ids: string[]) => ids.find((id) => !known(id));
  switch (c.verb) {
    case "look":
    case "inventory":
      return "it is not admissible now";
    case "go":
      if (!h.isReceptacle(c.target)) return `there is no ${c.target} to go to in this house`;
      return `you are already at ${c.target}`;
    case "open":
    case "close": {
      if (!h.isReceptacle(c.target)) return `there is no ${c.target} to ${c.verb} in this house`;
      if (h.at !== c.target) return `you are not at ${c.target} (${here}); go to it first`;
      if (!receptacleKind(kindOf(c.target)).openable) return `the ${c.target} cannot be opened or closed`;
      return `the ${c.target} is already ${c.verb === "open" ? "open" : "closed"}`;
    }
    case "use": {
      if (!h.lamps().includes(c.target)) return `the ${c.target} is not a lamp of this house`;
      return `you are not at the ${c.target} (${here})`;
    }
    case "examine":
      if (!known(c.target)) return `there is no ${c.target} in this house`;
      return `you can examine only the receptacle you are at and what you carry (${here})`;
    case "take": {
      const missing = unknown([c.object, c.place]);
      if (missing) return `there is no ${missing} in this house`;
      if (h.at !== c.place) return `you are not at ${c.place} (${here}); go to it first`;
      if (!h.accessible(c.place)) return `the ${c.place} is closed; open it first`;
      if (h.holding === c.object) return `you are already carrying the ${c.object}`;
      if (!h.contents.get(c.place)!.includes(c.object)) return `the ${c.object} is not in the ${c.place}`;
      if (objectKind(kindOf(c.object)).lamp) return `the ${c.object} cannot be taken`;
      return `your hands are full: you carry the ${h.holding}, and can carry one thing at a time`;
    }
    case "move": {
      const missing = unknown([c.object, c.place]);
      if (missing) return `there is no ${missing} in this house`;
      if (h.holding !== c.object) return `you are not carrying the ${c.object}`;
      if (h.at !== c.place) return `you are not at ${c.place} (${here}); go to it first`;
      if (!h.accessible(c.place)) return `the ${c.place} is closed; open it first`;
      return `nothing can be put on the ${c.place}`;
    }
    case "heat":
    case "cool":
    case "clean":
    case "slice": {
      const missing = unknown([c.object, c.tool]);
      if (missing) return `there is no ${missing} in this house`;
      if (c.verb === "slice") {
        if (h.holding !== c.tool) return `you must carry the ${c.tool} to slice with it`;
        if (!objectKind(kindOf(c.tool)).knife) return `the ${c.tool} cannot slice`;
        if (!h.at || !h.accessible(h.at) || !h.contents.get(h.at)!.includes(c.object))
          return `the ${c.object} is not in front of you (${here})`;
        if (!objectKind(kindOf(c.object)).slice) return `the ${c.object} cannot be sliced`;
        return `the ${c.object} is already sliced`;
      }
      if (!h.isReceptacle(c.tool)) return `the ${c.tool} cannot ${c.verb} things`;
      if (h.holding !== c.object) return `you must carry the ${c.object} to ${c.verb} it`;
      if (h.at !== c.tool) return `you are not at ${c.tool} (${here}); go to it first`;
      const [, does, can] = PROCESS.find(([v]) => v === c.verb)!;
      if (!receptacleKind(kindOf(c.tool))[does]) return `the ${c.tool} cannot ${c.verb} things`;
      const done = { heat: "heated", cool: "cooled", clean: "cleaned" }[c.verb];
      if (!objectKind(kindOf(c.object))[can]) return `the ${c.object} cannot be ${done}`;
      return "it is not admissible now";
    }
  }
}
