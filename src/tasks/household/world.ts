/**
 * World generation: a house layout (one to three rooms, each with numbered
 * receptacles, ALFWorld style: "cabinet 2") and the objects placed in it.
 * A world is plain JSON, carried in each row's extra_info, so an env needs
 * nothing but the row to rebuild it.
 *
 * Every kitchen has a fridge, a microwave, a stoveburner and a sinkbasin;
 * every bathroom a sinkbasin; every bedroom and living room a lamp (a
 * desklamp on one of its surfaces, or a floorlamp). The other receptacles and
 * every movable object come from the vocabulary part the split may use.
 */
import type { Rng } from "../../util/rng.js";
import {
  OBJECT_KINDS,
  RECEPTACLE_KINDS,
  ROOM_KINDS,
  receptacleKind,
  type ObjectKind,
  type RoomKind,
  type VocabPart,
} from "./vocab.js";

export interface Room {
  kind: RoomKind;
  /** Numbered receptacle names, in the order the room lists them. */
  receptacles: string[];
}

export interface Layout {
  rooms: Room[];
  /** Desk lamps: the lamp's name and the receptacle it stands on. */
  lamps: { id: string; at: string }[];
}

export interface HouseWorld extends Layout {
  /** Movable objects, each in the receptacle it starts in, in listing order. */
  objects: { id: string; at: string }[];
}

export const MAX_RECEPTACLES = 12;

const pick = <T>(rng: Rng, xs: readonly T[]): T => xs[rng.int(xs.length)];

/** A layout's identity: its rooms and receptacles (lamps included), as one string. */
export function layoutKey(l: Layout): string {
  const lamps = l.lamps.map((x) => `${x.id}@${x.at}`).join(",");
  return `${l.rooms.map((r) => `${r.kind}:${r.receptacles.join(",")}`).join("|")}|lamps:${lamps}`;
}

/** Numbers names per kind across the house: the second cabinet is "cabinet 2". */
class Numberer {
  private counts = new Map<string, number>();
  next(kind: string): string {
    const n = (this.counts.get(kind) ?? 0) + 1;
    this.counts.set(kind, n);
    return `${kind} ${n}`;
  }
}

const CORE_FURNITURE: Record<RoomKind, string[]> = {
  kitchen: ["fridge", "microwave", "stoveburner", "sinkbasin"],
  bathroom: ["sinkbasin"],
  bedroom: [],
  livingroom: [],
};

/**
 * A random layout over the allowed vocabulary, holding room `required`.
 * Rooms: `required` plus up to two others (distinct kinds).
 */
export function generateLayout(rng: Rng, parts: ReadonlySet<VocabPart>, required: RoomKind): Layout {
  for (;;) {
    const others = ROOM_KINDS.filter((k) => k !== required);
    const extra = [0, 1, 1, 2][rng.int(4)];
    const kinds: RoomKind[] = [required];
    while (kinds.length < 1 + extra) {
      const k = pick(rng, others);
      if (!kinds.includes(k)) kinds.push(k);
    }
    // Rooms in a fixed order, so the same rooms always read the same way.
    kinds.sort((a, b) => ROOM_KINDS.indexOf(a) - ROOM_KINDS.indexOf(b));
    const numbers = new Numberer();
    const lamps: Layout["lamps"] = [];
    const rooms = kinds.map((kind): Room => {
      const furniture = [...CORE_FURNITURE[kind]];
      if (kind === "kitchen" && rng.next() < 0.3) furniture.push("stoveburner");
      const floorlamp = (kind === "bedroom" || kind === "livingroom") && rng.next() < 0.4;
      if (floorlamp) furniture.push("floorlamp");
      const choices = RECEPTACLE_KINDS.filter((r) => r.part !== "core" && parts.has(r.part) && r.rooms.includes(kind));
      const n = 2 + rng.int(kind === "kitchen" || kind === "bathroom" ? 2 : 3);
      const picked: string[] = [];
      while (picked.length < n) {
        const r = pick(rng, choices);
        // A second cabinet or drawer is common; a second bed is not.
        if (picked.includes(r.name) && !(r.openable && picked.filter((x) => x === r.name).length < 2)) continue;
        picked.push(r.name);
      }
      furniture.push(...picked);
      const receptacles = shuffleCopy(rng, furniture).map((k) => numbers.next(k));
      if (!floorlamp && (kind === "bedroom" || kind === "livingroom")) {
        const surfaces = receptacles.filter((r) => isSurface(r));
        lamps.push({ id: numbers.next("desklamp"), at: pick(rng, surfaces) });
      }
      return { kind, receptacles };
    });
    const layout = { rooms, lamps };
    if (allReceptacles(layout).length <= MAX_RECEPTACLES && lampsPlaced(layout)) return layout;
  }
}

function lampsPlaced(l: Layout): boolean {
  return l.lamps.every((x) => x.at !== undefined);
}

function shuffleCopy<T>(rng: Rng, xs: readonly T[]): T[] {
  const out = xs.slice();
  for (let i = out.length - 1; i > 0; i--) {
    const j = rng.int(i + 1);
    [out[i], out[j]] = [out[j], out[i]];
  }
  return out;
}

const kindName = (id: string) => id.slice(0, id.lastIndexOf(" "));

/** A receptacle without a door that things stand on (not an appliance, not the garbage). */
export function isSurface(id: string): boolean {
  const k = receptacleKind(kindName(id));
  return !k.openable && !k.heats && !k.cools && !k.cleans && !k.lamp && !/garbage|waste|toilet|bathtub/.test(k.name);
}

export function allReceptacles(l: Layout): string[] {
  return l.rooms.flatMap((r) => r.receptacles);
}

/** Receptacles an object of a kind may start in: those of its rooms that hold things (appliances too, rarely). */
export function startingPlaces(l: Layout, kind: ObjectKind, rng: Rng): string[] {
  const rooms = l.rooms.filter((r) => kind.rooms.includes(r.kind));
  const places = rooms.flatMap((r) =>
    r.receptacles.filter((id) => {
      const k = receptacleKind(kindName(id));
      if (k.lamp) return false;
      if (k.heats || k.cleans) return rng.next() < 0.3;
      if (k.cools) return !!(kind.cool || kind.heat);
      return true;
    }),
  );
  return places;
}

/** Movable object kinds of the allowed vocabulary (lamps aside). */
export function movableKinds(parts: ReadonlySet<VocabPart>): ObjectKind[] {
  return OBJECT_KINDS.filter((k) => parts.has(k.part) && !k.lamp);
}

/** Object placement: `required` kinds first (each with its count), then `distractors` random others, numbered per kind. */
export function placeObjects(
  rng: Rng,
  layout: Layout,
  parts: ReadonlySet<VocabPart>,
  required: { kind: ObjectKind; count: number; avoid: (at: string) => boolean }[],
  distractors: number,
): HouseWorld | undefined {
  const numbers = new Numberer();
  const objects: HouseWorld["objects"] = [];
  for (const { kind, count, avoid } of required) {
    const places = startingPlaces(layout, kind, rng).filter((p) => !avoid(p));
    if (places.length === 0) return undefined;
    for (let i = 0; i < count; i++) objects.push({ id: numbers.next(kind.name), at: pick(rng, places) });
  }
  const skip = new Set(required.map((r) => r.kind.name));
  const roomKinds = new Set(layout.rooms.map((r) => r.kind));
  const pool = movableKinds(parts).filter((k) => !skip.has(k.name) && k.rooms.some((r) => roomKinds.has(r)));
  for (let i = 0; i < distractors && pool.length > 0; i++) {
    const kind = pick(rng, pool);
    const places = startingPlaces(layout, kind, rng);
    if (places.length > 0) objects.push({ id: numbers.next(kind.name), at: pick(rng, places) });
  }
  // Listing order: shuffled, so the required objects are not always first.
  return { rooms: layout.rooms, lamps: layout.lamps, objects: shuffleCopy(rng, objects) };
}
