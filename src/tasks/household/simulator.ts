/**
 * The simulator: a house's state and what each command does to it.
 * State: where the agent stands (nowhere at first: "the middle of the
 * house"), the one object it carries, which receptacles are open, where each
 * object is, each object's condition (clean, hot, cold, sliced) and which
 * lamps are on. `execute` runs an admissible command (admissible.ts says
 * which are) and returns the observation text.
 *
 * Commands: go to <r>, open <r>, close <r>, take <o> from <r>, move <o> to
 * <r>, use <lamp>, clean <o> with <r>, heat <o> with <r>, cool <o> with <r>,
 * slice <o> with <knife>, examine <thing>, look, inventory.
 */
import { kindOf, listing, objectKind, receptacleKind, ROOM_NAMES } from "./vocab.js";
import type { HouseWorld } from "./world.js";

export interface Condition {
  clean: boolean;
  hot: boolean;
  cold: boolean;
  sliced: boolean;
}

export class House {
  /** The receptacle the agent stands at (null: the middle of the house). */
  at: string | null = null;
  holding: string | null = null;
  readonly open = new Set<string>();
  readonly lampsOn = new Set<string>();
  /** Receptacle -> the things in it, in listing order (desk lamps first). */
  readonly contents = new Map<string, string[]>();
  readonly condition = new Map<string, Condition>();
  readonly receptacles: readonly string[];

  constructor(readonly world: HouseWorld) {
    this.receptacles = world.rooms.flatMap((r) => r.receptacles);
    for (const r of this.receptacles) this.contents.set(r, []);
    for (const l of world.lamps) this.place(l.id, l.at);
    for (const o of world.objects) {
      this.place(o.id, o.at);
      this.condition.set(o.id, { clean: false, hot: false, cold: false, sliced: false });
    }
  }

  private place(id: string, at: string): void {
    const list = this.contents.get(at);
    if (!list) throw new Error(`internal: ${id} is placed in '${at}', which is not in the house`);
    list.push(id);
  }

  clone(): House {
    const h = new House(this.world);
    h.at = this.at;
    h.holding = this.holding;
    for (const r of this.open) h.open.add(r);
    for (const l of this.lampsOn) h.lampsOn.add(l);
    for (const [r, xs] of this.contents) h.contents.set(r, xs.slice());
    for (const [o, c] of this.condition) h.condition.set(o, { ...c });
    return h;
  }

  isReceptacle(id: string): boolean {
    return this.contents.has(id);
  }

  /** The receptacle an object is in (undefined when carried or unknown). */
  locationOf(id: string): string | undefined {
    for (const [r, xs] of this.contents) if (xs.includes(id)) return r;
    return undefined;
  }

  /** Open receptacles and those without a door: their contents can be seen and reached. */
  accessible(r: string): boolean {
    return !receptacleKind(kindOf(r)).openable || this.open.has(r);
  }

  /** Every object in the house (carried one included), lamps aside. */
  objects(): string[] {
    return [...this.condition.keys()];
  }

  /** The lamps, desk lamps and floor lamps alike. */
  lamps(): string[] {
    return [...this.world.lamps.map((l) => l.id), ...this.receptacles.filter((r) => receptacleKind(kindOf(r)).lamp)];
  }

  /** Where a lamp is used from: a desk lamp's receptacle, or the floor lamp itself. */
  lampPlace(lamp: string): string | undefined {
    return this.isReceptacle(lamp) ? lamp : this.locationOf(lamp);
  }

  /** The opening view: the rooms and what stands in each. */
  overview(): string {
    const rooms = this.world.rooms.map((r) => `the ${ROOM_NAMES[r.kind]}`);
    const where = rooms.length === 1 ? rooms[0] : `${rooms.slice(0, -1).join(", ")} and ${rooms[rooms.length - 1]}`;
    const parts = this.world.rooms.map((r) => `In the ${ROOM_NAMES[r.kind]}, you see ${listing(r.receptacles)}.`);
    return `You are in the middle of a house with ${where}. ${parts.join(" ")}`;
  }

  /** What one sees of a receptacle from in front of it. */
  view(r: string): string {
    const k = receptacleKind(kindOf(r));
    if (k.lamp) return `The ${r} is ${this.lampsOn.has(r) ? "on" : "off"}.`;
    const things = listing(this.contents.get(r)!);
    if (k.openable) return this.open.has(r) ? `The ${r} is open. In it, you see ${things}.` : `The ${r} is closed.`;
    return `On the ${r}, you see ${things}.`;
  }

  /** Runs an admissible command; returns what the agent observes. */
  execute(command: string): string {
    const c = parseCommand(command);
    if (!c) throw new Error(`internal: '${command}' is not a command`);
    switch (c.verb) {
      case "look":
        return this.at === null ? this.overview() : `You are at ${this.at}. ${this.view(this.at)}`;
      case "inventory":
        return this.holding ? `You are carrying ${listing([this.holding])}.` : "You are not carrying anything.";
      case "go":
        this.at = c.target;
        return `You arrive at ${c.target}. ${this.view(c.target)}`;
      case "open":
        this.open.add(c.target);
        return `You open the ${c.target}. In it, you see ${listing(this.contents.get(c.target)!)}.`;
      case "close":
        this.open.delete(c.target);
        return `You close the ${c.target}.`;
      case "take": {
        const list = this.contents.get(c.place)!;
        list.splice(list.indexOf(c.object), 1);
        this.holding = c.object;
        return `You pick up the ${c.object} from the ${c.place}.`;
      }
      case "move":
        this.contents.get(c.place)!.push(c.object);
        this.holding = null;
        return `You move the ${c.object} to the ${c.place}.`;
      case "use":
        if (this.lampsOn.delete(c.target)) return `You turn off the ${c.target}.`;
        this.lampsOn.add(c.target);
        return `You turn on the ${c.target}.`;
      case "heat": {
        const s = this.condition.get(c.object)!;
        [s.hot, s.cold] = [true, false];
        return `You heat the ${c.object} using the ${c.tool}.`;
      }
      case "cool": {
        const s = this.condition.get(c.object)!;
        [s.hot, s.cold] = [false, true];
        return `You cool the ${c.object} using the ${c.tool}.`;
      }
      case "clean":
        this.condition.get(c.object)!.clean = true;
        return `You clean the ${c.object} using the ${c.tool}.`;
      case "slice":
        this.condition.get(c.object)!.sliced = true;
        return `You slice the ${c.object} with the ${c.tool}.`;
      case "examine":
        return this.examine(c.target);
    }
  }

  private examine(id: string): string {
    if (this.isReceptacle(id)) return this.view(id);
    if (objectKind(kindOf(id)).lamp) return `The ${id} is ${this.lampsOn.has(id) ? "on" : "off"}.`;
    const s = this.condition.get(id)!;
    const states = (["clean", "hot", "cold", "sliced"] as const).filter((k) => s[k]);
    if (states.length === 0) return `There is nothing special about the ${id}.`;
    const said = states.length === 1 ? states[0] : `${states.slice(0, -1).join(", ")} and ${states[states.length - 1]}`;
    return `The ${id} is ${said}.`;
  }
}

export type Command =
  | { verb: "look" | "inventory" }
  | { verb: "go" | "open" | "close" | "use" | "examine"; target: string }
  | { verb: "take"; object: string; place: string }
  | { verb: "move"; object: string; place: string }
  | { verb: "heat" | "cool" | "clean" | "slice"; object: string; tool: string };

const NAME = "([a-z]+ \\d+)";
const PATTERNS: [RegExp, (m: RegExpExecArray) => Command][] = [
  [/^look$/, () => ({ verb: "look" })],
  [/^inventory$/, () => ({ verb: "inventory" })],
  [new RegExp(`^go to ${NAME}$`), (m) => ({ verb: "go", target: m[1] })],
  [new RegExp(`^(open|close|use|examine) ${NAME}$`), (m) => ({ verb: m[1] as "open", target: m[2] })],
  [new RegExp(`^take ${NAME} from ${NAME}$`), (m) => ({ verb: "take", object: m[1], place: m[2] })],
  [new RegExp(`^move ${NAME} to ${NAME}$`), (m) => ({ verb: "move", object: m[1], place: m[2] })],
  [
    new RegExp(`^(heat|cool|clean|slice) ${NAME} with ${NAME}$`),
    (m) => ({ verb: m[1] as "heat", object: m[2], tool: m[3] }),
  ],
];

/** The command's shape, or undefined when it is no command at all. Expects normalized text (see normalizeCommand). */
export function parseCommand(text: string): Command | undefined {
  for (const [re, make] of PATTERNS) {
    const m = re.exec(text);
    if (m) return make(m);
  }
  return undefined;
}

/** Lower case, single spaces, no trailing period: "Go to  Fridge 1." -> "go to fridge 1". */
export function normalizeCommand(text: string): string {
  return text.toLowerCase().replace(/\s+/g, " ").trim().replace(/\.$/, "");
}
