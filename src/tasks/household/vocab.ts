/**
 * The household's vocabulary: room kinds, receptacle kinds and object kinds,
 * each with what it can do. Every kind belongs to one vocabulary part:
 *   core   -- the appliances and tools every task kind relies on (fridge,
 *             microwave, stoveburner, sinkbasin, floorlamp, desklamp, knife),
 *             in every split;
 *   seen   -- names used by the train and val worlds only;
 *   unseen -- names held out for the test worlds only.
 * So a test world shares no container, surface or movable-object name with
 * any train world: only the core appliances and tools.
 */
export type VocabPart = "core" | "seen" | "unseen";
export type RoomKind = "kitchen" | "bathroom" | "bedroom" | "livingroom";
export const ROOM_KINDS: readonly RoomKind[] = ["kitchen", "bathroom", "bedroom", "livingroom"];
export const ROOM_NAMES: Record<RoomKind, string> = {
  kitchen: "kitchen",
  bathroom: "bathroom",
  bedroom: "bedroom",
  livingroom: "living room",
};

export interface ReceptacleKind {
  name: string;
  part: VocabPart;
  rooms: readonly RoomKind[];
  /** Has a door: its contents are seen, taken and added to only while open. */
  openable?: boolean;
  /** What it does to an object held in front of it. */
  heats?: boolean;
  cools?: boolean;
  cleans?: boolean;
  /** A lamp that stands on the floor: a place to go to, to use, that holds nothing. */
  lamp?: boolean;
}

export interface ObjectKind {
  name: string;
  part: VocabPart;
  rooms: readonly RoomKind[];
  heat?: boolean;
  cool?: boolean;
  clean?: boolean;
  slice?: boolean;
  /** Small enough to look at under a lamp (the look-at-in-light tasks). */
  look?: boolean;
  /** A desk lamp: stands on a receptacle, cannot be taken, can be used. */
  lamp?: boolean;
  /** Slices sliceable things when held. */
  knife?: boolean;
}

const K: RoomKind[] = ["kitchen"];
const B: RoomKind[] = ["bathroom"];
const KB: RoomKind[] = ["kitchen", "bathroom"];
const BR: RoomKind[] = ["bedroom"];
const L: RoomKind[] = ["livingroom"];
const BL: RoomKind[] = ["bedroom", "livingroom"];
const ALL: RoomKind[] = ["kitchen", "bathroom", "bedroom", "livingroom"];

export const RECEPTACLE_KINDS: readonly ReceptacleKind[] = [
  { name: "fridge", part: "core", rooms: K, openable: true, cools: true },
  { name: "microwave", part: "core", rooms: K, openable: true, heats: true },
  { name: "stoveburner", part: "core", rooms: K, heats: true },
  { name: "sinkbasin", part: "core", rooms: KB, cleans: true },
  { name: "floorlamp", part: "core", rooms: BL, lamp: true },
  { name: "cabinet", part: "seen", rooms: KB, openable: true },
  { name: "drawer", part: "seen", rooms: ["kitchen", "bedroom", "livingroom"], openable: true },
  { name: "countertop", part: "seen", rooms: KB },
  { name: "diningtable", part: "seen", rooms: K },
  { name: "shelf", part: "seen", rooms: ALL },
  { name: "garbagecan", part: "seen", rooms: ALL },
  { name: "desk", part: "seen", rooms: BR },
  { name: "sidetable", part: "seen", rooms: BL },
  { name: "bed", part: "seen", rooms: BR },
  { name: "sofa", part: "seen", rooms: L },
  { name: "coffeetable", part: "seen", rooms: L },
  { name: "toilet", part: "seen", rooms: B },
  { name: "cupboard", part: "unseen", rooms: KB, openable: true },
  { name: "chest", part: "unseen", rooms: ["kitchen", "bedroom", "livingroom"], openable: true },
  { name: "safe", part: "unseen", rooms: BL, openable: true },
  { name: "worktop", part: "unseen", rooms: KB },
  { name: "kitchenisland", part: "unseen", rooms: K },
  { name: "bookcase", part: "unseen", rooms: ALL },
  { name: "wastebasket", part: "unseen", rooms: ALL },
  { name: "dresser", part: "unseen", rooms: BR },
  { name: "nightstand", part: "unseen", rooms: BL },
  { name: "armchair", part: "unseen", rooms: L },
  { name: "ottoman", part: "unseen", rooms: L },
  { name: "tvstand", part: "unseen", rooms: L },
  { name: "bathtub", part: "unseen", rooms: B },
];

const FOOD = { heat: true, cool: true, clean: true, slice: true } as const;
const DISH = { heat: true, cool: true, clean: true } as const;

export const OBJECT_KINDS: readonly ObjectKind[] = [
  { name: "knife", part: "core", rooms: K, clean: true, knife: true },
  { name: "desklamp", part: "core", rooms: BL, lamp: true },
  { name: "apple", part: "seen", rooms: K, ...FOOD },
  { name: "tomato", part: "seen", rooms: K, ...FOOD },
  { name: "potato", part: "seen", rooms: K, ...FOOD },
  { name: "bread", part: "seen", rooms: K, heat: true, cool: true, slice: true },
  { name: "egg", part: "seen", rooms: K, ...DISH },
  { name: "mug", part: "seen", rooms: K, ...DISH, look: true },
  { name: "cup", part: "seen", rooms: K, ...DISH },
  { name: "plate", part: "seen", rooms: K, ...DISH },
  { name: "bowl", part: "seen", rooms: K, ...DISH },
  { name: "spoon", part: "seen", rooms: K, clean: true },
  { name: "fork", part: "seen", rooms: K, clean: true },
  { name: "winebottle", part: "seen", rooms: K, cool: true },
  { name: "soapbar", part: "seen", rooms: B, clean: true },
  { name: "cloth", part: "seen", rooms: B, clean: true },
  { name: "spraybottle", part: "seen", rooms: B },
  { name: "toiletpaper", part: "seen", rooms: B },
  { name: "book", part: "seen", rooms: BL, look: true },
  { name: "cd", part: "seen", rooms: BL, look: true },
  { name: "pencil", part: "seen", rooms: BL, look: true },
  { name: "pen", part: "seen", rooms: BL, look: true },
  { name: "keychain", part: "seen", rooms: BL, look: true },
  { name: "cellphone", part: "seen", rooms: BL, look: true },
  { name: "creditcard", part: "seen", rooms: BL, look: true },
  { name: "alarmclock", part: "seen", rooms: BR, look: true },
  { name: "remotecontrol", part: "seen", rooms: L, look: true },
  { name: "pillow", part: "seen", rooms: BL },
  { name: "pear", part: "unseen", rooms: K, ...FOOD },
  { name: "onion", part: "unseen", rooms: K, ...FOOD },
  { name: "lettuce", part: "unseen", rooms: K, cool: true, clean: true, slice: true },
  { name: "pan", part: "unseen", rooms: K, ...DISH },
  { name: "pot", part: "unseen", rooms: K, ...DISH },
  { name: "teacup", part: "unseen", rooms: K, ...DISH, look: true },
  { name: "saucer", part: "unseen", rooms: K, ...DISH },
  { name: "ladle", part: "unseen", rooms: K, clean: true },
  { name: "milkcarton", part: "unseen", rooms: K, cool: true },
  { name: "sponge", part: "unseen", rooms: B, clean: true },
  { name: "handtowel", part: "unseen", rooms: B, clean: true },
  { name: "soapbottle", part: "unseen", rooms: B },
  { name: "tissuebox", part: "unseen", rooms: ["bathroom", "bedroom", "livingroom"] },
  { name: "notebook", part: "unseen", rooms: BL, look: true },
  { name: "newspaper", part: "unseen", rooms: L, look: true },
  { name: "wallet", part: "unseen", rooms: BL, look: true },
  { name: "watch", part: "unseen", rooms: BL, look: true },
  { name: "glasses", part: "unseen", rooms: BL, look: true },
  { name: "statue", part: "unseen", rooms: L, look: true },
  { name: "candle", part: "unseen", rooms: ["bathroom", "livingroom"], look: true },
  { name: "laptop", part: "unseen", rooms: BR },
];

const RECEPTACLES = new Map(RECEPTACLE_KINDS.map((k) => [k.name, k]));
const OBJECTS = new Map(OBJECT_KINDS.map((k) => [k.name, k]));

export function receptacleKind(name: string): ReceptacleKind {
  const k = RECEPTACLES.get(name);
  if (!k) throw new Error(`internal: unknown receptacle kind '${name}'`);
  return k;
}

export function objectKind(name: string): ObjectKind {
  const k = OBJECTS.get(name);
  if (!k) throw new Error(`internal: unknown object kind '${name}'`);
  return k;
}

/** The kind of a numbered name: "cabinet 2" -> "cabinet". */
export const kindOf = (id: string): string => id.slice(0, id.lastIndexOf(" "));

/** The vocabulary parts a split's worlds draw from. */
export function partsFor(unseen: boolean): ReadonlySet<VocabPart> {
  return new Set<VocabPart>(unseen ? ["core", "unseen"] : ["core", "seen"]);
}

/** "an apple 1", "a cabinet 2". */
export function withArticle(id: string): string {
  return `${/^[aeiou]/.test(id) ? "an" : "a"} ${id}`;
}

/** "a, b and c" (or "nothing"). */
export function listing(ids: readonly string[]): string {
  const xs = ids.map(withArticle);
  if (xs.length === 0) return "nothing";
  return xs.length === 1 ? xs[0] : `${xs.slice(0, -1).join(", ")} and ${xs[xs.length - 1]}`;
}
