/**
 * The generated product catalogue. Five categories, six product types each;
 * a type names its option kinds (size, color, flavor, scent, count...) and a
 * price range, a category names the attribute pool its products draw from
 * ("gluten free", "water resistant"...). A product: a made-up brand, two
 * attributes of its category, 2-4 values of each option kind of its type, a
 * price, and short description / features / reviews. Its title is
 * "{Brand} {attribute} {attribute} {type}", so a results page shows what a
 * product is, but not which option values it offers.
 *
 * Some types share a word inside a category ("face cream" / "hand cream"):
 * the score's type factor (score.ts) gives partial credit there.
 * Option values are unique across the option kinds of a type, so a value
 * names its kind.
 */
import { Rng } from "../../util/rng.js";
import { NameGenerator } from "../multihop/names.js";

export const CATEGORIES = ["beauty", "electronics", "grocery", "clothing", "home"] as const;
export type Category = (typeof CATEGORIES)[number];

export const OPTION_VALUES: Record<string, readonly string[]> = {
  color: ["black", "white", "red", "blue", "gray", "pink", "green", "navy"],
  shade: ["ruby", "coral", "nude", "berry", "plum", "rose"],
  size: ["small", "medium", "large", "x-large"],
  volume: ["2 ounce", "4 ounce", "8 ounce", "16 ounce"],
  scent: ["lavender", "vanilla", "citrus", "cedar", "unscented"],
  length: ["3 feet", "6 feet", "10 feet"],
  pack: ["1 pack", "2 pack", "3 pack", "4 pack"],
  flavor: ["chocolate", "caramel", "mint", "lemon", "original", "berry blend"],
  count: ["6 count", "12 count", "24 count"],
  "shoe size": ["us 7", "us 8", "us 9", "us 10", "us 11"],
  "bed size": ["twin", "queen", "king"],
};

export interface ProductType {
  name: string;
  category: Category;
  options: readonly string[];
  /** Price range in dollars. */
  price: readonly [number, number];
}

const T = (name: string, category: Category, options: string[], price: [number, number]): ProductType => ({
  name,
  category,
  options,
  price,
});

export const PRODUCT_TYPES: readonly ProductType[] = [
  T("lipstick", "beauty", ["shade"], [6, 24]),
  T("nail polish", "beauty", ["shade"], [4, 15]),
  T("face cream", "beauty", ["volume", "scent"], [9, 45]),
  T("hand cream", "beauty", ["volume", "scent"], [5, 20]),
  T("shampoo", "beauty", ["volume", "scent"], [6, 30]),
  T("dry shampoo", "beauty", ["volume"], [7, 25]),
  T("wireless earbuds", "electronics", ["color"], [19, 90]),
  T("wireless speaker", "electronics", ["color"], [22, 120]),
  T("phone case", "electronics", ["color", "pack"], [8, 30]),
  T("usb cable", "electronics", ["length", "pack"], [6, 20]),
  T("wall charger", "electronics", ["color", "pack"], [10, 35]),
  T("hdmi cable", "electronics", ["length"], [7, 25]),
  T("ground coffee", "grocery", ["flavor", "volume"], [8, 28]),
  T("coffee pods", "grocery", ["flavor", "count"], [10, 40]),
  T("green tea", "grocery", ["count"], [4, 18]),
  T("protein bar", "grocery", ["flavor", "count"], [12, 40]),
  T("trail mix", "grocery", ["flavor", "volume"], [5, 22]),
  T("granola", "grocery", ["flavor", "volume"], [4, 16]),
  T("running shoes", "clothing", ["color", "shoe size"], [35, 140]),
  T("walking shoes", "clothing", ["color", "shoe size"], [30, 110]),
  T("rain jacket", "clothing", ["color", "size"], [30, 150]),
  T("fleece jacket", "clothing", ["color", "size"], [25, 90]),
  T("ankle socks", "clothing", ["color", "pack"], [6, 24]),
  T("yoga pants", "clothing", ["color", "size"], [15, 60]),
  T("bed pillow", "home", ["bed size", "pack"], [15, 70]),
  T("throw pillow", "home", ["color", "pack"], [10, 40]),
  T("bath towel", "home", ["color", "pack"], [12, 50]),
  T("hand towel", "home", ["color", "pack"], [8, 30]),
  T("scented candle", "home", ["scent", "pack"], [8, 35]),
  T("storage bin", "home", ["color", "size"], [10, 45]),
];

export const ATTRIBUTES: Record<Category, readonly string[]> = {
  beauty: ["long lasting", "vegan", "organic", "natural", "gentle", "paraben free"],
  electronics: ["waterproof", "compact", "lightweight", "fast charging", "durable", "slim"],
  grocery: ["gluten free", "organic", "sugar free", "non gmo", "low fat", "keto"],
  clothing: ["washable", "quick dry", "slim fit", "stretch", "lightweight", "warm"],
  home: ["washable", "soft", "recycled", "non toxic", "plush", "easy care"],
};

export interface Product {
  /** "P" + 4 digits, unique. */
  id: string;
  category: Category;
  type: string;
  brand: string;
  /** Two attributes of its category, in title order. */
  attributes: string[];
  /** Option kind -> the values offered, in display order (kinds in the type's order). */
  options: Record<string, string[]>;
  /** Whole dollars. */
  price: number;
  title: string;
  description: string;
  features: string[];
  reviews: string[];
}

export interface Catalogue {
  products: Product[];
  byId: Map<string, Product>;
}

const pick = <T>(rng: Rng, xs: readonly T[]): T => xs[rng.int(xs.length)];

/** k distinct items of xs, in the order of xs. */
export function sample<T>(rng: Rng, xs: readonly T[], k: number): T[] {
  const idx = xs.map((_, i) => i);
  for (let i = idx.length - 1; i > 0; i--) {
    const j = rng.int(i + 1);
    [idx[i], idx[j]] = [idx[j], idx[i]];
  }
  return idx
    .slice(0, k)
    .sort((a, b) => a - b)
    .map((i) => xs[i]);
}

export function productType(name: string): ProductType {
  const t = PRODUCT_TYPES.find((p) => p.name === name);
  if (!t) throw new Error(`internal: unknown product type '${name}'`);
  return t;
}

export const formatPrice = (p: number): string => `$${p}`;

const USES: Record<Category, string> = {
  beauty: "daily care",
  electronics: "home, office and travel",
  grocery: "breakfast and snacks",
  clothing: "every season",
  home: "bedroom and bath",
};
const PRAISE = ["works great", "good value", "just as described", "would buy again", "nice quality"];
const GRIPES = ["arrived late", "smaller than expected", "packaging was damaged", "color a bit off"];

function makeProduct(rng: Rng, id: string, brand: string): Product {
  const type = pick(rng, PRODUCT_TYPES);
  const attributes = sample(rng, ATTRIBUTES[type.category], 2);
  const options: Record<string, string[]> = {};
  for (const kind of type.options) {
    const pool = OPTION_VALUES[kind];
    options[kind] = sample(rng, pool, 2 + rng.int(Math.min(3, pool.length - 1)));
  }
  const [lo, hi] = type.price;
  const price = lo + rng.int(hi - lo + 1);
  const title = `${brand} ${attributes.join(" ")} ${type.name}`;
  const stars = 3 + rng.int(3);
  return {
    id,
    category: type.category,
    type: type.name,
    brand,
    attributes,
    options,
    price,
    title,
    description: `A ${attributes[0]}, ${attributes[1]} ${type.name} by ${brand}, made for ${USES[type.category]}.`,
    features: [
      attributes[0],
      attributes[1],
      ...type.options.map((k) => `${options[k].length} ${k} choices`),
      `ships in ${1 + rng.int(5)} days`,
    ],
    reviews: [
      `${stars} stars: ${pick(rng, PRAISE)}.`,
      `${Math.max(1, stars - 1 - rng.int(2))} stars: ${pick(rng, GRIPES)}.`,
    ],
  };
}

/** Deterministic for (seed, size). Brands: made-up syllable words, each used by several products. */
export const MAX_CATALOGUE = 9000;

export function generateCatalogue(seed: number, size: number): Catalogue {
  const rng = new Rng(seed, 101);
  const names = new NameGenerator(new Rng(seed, 102));
  const brands = Array.from({ length: Math.max(8, Math.ceil(size / 12)) }, () => names.word(2));
  const ids = sample(
    rng,
    Array.from({ length: MAX_CATALOGUE }, (_, i) => `P${1000 + i}`),
    size,
  );
  const products = ids.map((id) => makeProduct(rng, id, pick(rng, brands)));
  for (let i = products.length - 1; i > 0; i--) {
    const j = rng.int(i + 1);
    [products[i], products[j]] = [products[j], products[i]];
  }
  return { products, byId: new Map(products.map((p) => [p.id, p])) };
}
