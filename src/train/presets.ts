/**
 * Named recipe presets (`preset: NAME` at a recipe's top level): settings a recipe gets unless it
 * sets them itself. The recipe's own values, and `key.path=value` overrides, win key by key.
 *
 *   steppo  Agent-R1's StepPO (its ALFWorld script's settings): step-level GAE with the critic's
 *           value at the last prompt token of each step (`gae-step`), GSPO's sequence-level ratio
 *           with clips 3e-4 / 4e-4 and dual clip 10, seq-mean-token-mean, and a k3 KL to the
 *           reference at 0.001 in the loss. Learning rates are left to the recipe: the script's
 *           (actor 1e-6, critic 1e-5) are for a 4B model.
 */
import { InputError } from "../util/errors.js";

type Json = Record<string, unknown>;

export const RECIPE_PRESETS = {
  steppo: {
    algorithm: { estimator: "gae-step", kl: { coef: 0.001, form: "k3", inReward: false } },
    loss: { type: "gspo", clipLow: 3e-4, clipHigh: 4e-4, dualClip: 10, aggregation: "seq-mean-token-mean" },
  },
} as const;
export type PresetName = keyof typeof RECIPE_PRESETS;
export const PRESET_NAMES = Object.keys(RECIPE_PRESETS) as PresetName[];

const isObject = (v: unknown): v is Json => typeof v === "object" && v !== null && !Array.isArray(v);

/** `under` filled in beneath `over`: keys `over` sets keep its values, sections merge key by key. */
function beneath(over: Json, under: Json): Json {
  const out: Json = { ...over };
  for (const [k, v] of Object.entries(under)) {
    if (!Object.hasOwn(over, k)) out[k] = isObject(v) ? beneath({}, v) : v;
    else if (isObject(over[k]) && isObject(v)) out[k] = beneath(over[k] as Json, v);
  }
  return out;
}

/** The raw recipe with its `preset` (if any) filled in beneath it; an unknown name is one line naming them. */
export function applyPreset(raw: Json, source: string): Json {
  if (!Object.hasOwn(raw, "preset") || raw.preset === undefined) return raw;
  const name = raw.preset;
  if (typeof name !== "string" || !Object.hasOwn(RECIPE_PRESETS, name))
    throw new InputError(
      `${source}: preset: unknown preset ${JSON.stringify(name)}; presets: ${PRESET_NAMES.join(", ")}`,
    );
  return beneath(raw, RECIPE_PRESETS[name as PresetName] as unknown as Json);
}
