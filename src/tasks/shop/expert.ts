/**
 * The scripted expert. Every decision uses only what the agent sees: the
 * instruction and the pages (visible.ts), never the target product. It
 * searches the instruction's key words (its attributes and product type); on
 * a results page it opens the first listed product, in page order, whose line
 * shows the wanted type, every wanted attribute and a price under the budget,
 * skipping products it opened and rejected; with no such product on the page
 * it clicks next >, and with no page left it gives up. On the product page it
 * chooses each wanted value and buys when all are offered, otherwise it goes
 * back with < Prev (saying which wanted value is missing) and opens the next
 * match. Any product it buys scores 1; it need not be the target. Each step
 * has a short thought saying what was seen.
 * Mistakes (demonstrations at rate 1 - quality):
 *   "first_result"  opens the first listed product whose line does not meet the instruction, chooses what it can, buys
 *   "no_options"    opens the first match and buys it without looking at or choosing any option
 * The plan is played on a simulator as it is made, so every command is one
 * the page offers.
 */
import { formatPrice, type Catalogue, type Product } from "./catalogue.js";
import { goalQuery, optionPhrase, type Goal } from "./instructions.js";
import { pageCount, pageIds, product } from "./pages.js";
import type { ShopSearch } from "./search.js";
import { ShopSim } from "./simulator.js";
import { listedMatch, missingOptions } from "./visible.js";

export const SHOP_MISTAKES = ["first_result", "no_options"] as const;
export type ShopMode = "expert" | (typeof SHOP_MISTAKES)[number];

export interface ExpertStep {
  thought: string;
  command: string;
}

interface Walk {
  goal: Goal;
  catalogue: Catalogue;
  sim: ShopSim;
  run(thought: string, command: string): void;
}

const wanted = (goal: Goal) => `${goal.attributes.join(" and ")} ${goal.type}`;
const seen = (p: Product) => `${p.id} is ${p.attributes.join(" and ")} ${p.type} at ${formatPrice(p.price)}`;

function resultsPage(sim: ShopSim) {
  const page = sim.current;
  if (page.kind !== "results") throw new Error(`internal: the expert expected a results page, not ${page.kind}`);
  return page;
}

/**
 * From a results page: opens the first visible match not yet rejected, paging on when the page has none; with
 * checkOptions, goes back from a match that lacks a wanted value and tries the next. The product left open, or
 * undefined when the pages run out.
 */
function openMatch(w: Walk, checkOptions: boolean): Product | undefined {
  const { goal, catalogue, sim } = w;
  const rejected = new Set<string>();
  for (;;) {
    const page = resultsPage(sim);
    const ids = pageIds(page);
    const pick = ids.find((id) => !rejected.has(id) && listedMatch(goal, product(catalogue, id)));
    if (pick === undefined) {
      if (page.page + 1 >= pageCount(page.ids)) return undefined;
      const other = ids.some((id) => rejected.has(id)) ? "other " : "";
      w.run(
        `No ${other}product on this page is ${wanted(goal)} under ${goal.budget} dollars. I will look at the next page.`,
        "click[next >]",
      );
      continue;
    }
    const p = product(catalogue, pick);
    w.run(`${seen(p)}, under ${goal.budget} dollars. I will open it.`, `click[${p.id}]`);
    const missing = checkOptions ? missingOptions(goal, p) : [];
    if (missing.length === 0) return p;
    rejected.add(p.id);
    w.run(`${p.id} has no ${missing.join(" and no ")}. I go back to the results.`, "click[< Prev]");
  }
}

/** The first listed product (first results page) whose line does not meet the instruction, opened. */
function openMismatch(w: Walk): Product | undefined {
  const pick = pageIds(resultsPage(w.sim)).find((id) => !listedMatch(w.goal, product(w.catalogue, id)));
  if (pick === undefined) return undefined;
  const p = product(w.catalogue, pick);
  w.run(`${seen(p)}. I will open it.`, `click[${p.id}]`);
  return p;
}

/** The expert's steps for a goal, or undefined when no listed product serves (or the mode cannot apply). */
export function expertSteps(
  goal: Goal,
  catalogue: Catalogue,
  search: ShopSearch,
  mode: ShopMode = "expert",
): ExpertStep[] | undefined {
  const sim = new ShopSim(catalogue, search, goal);
  const steps: ExpertStep[] = [];
  const run = (thought: string, command: string) => {
    const r = sim.act(command);
    if (!r.ok) throw new Error(`internal: expert command ${command} failed: ${r.error}`);
    steps.push({ thought, command });
  };
  const w: Walk = { goal, catalogue, sim, run };
  const query = goalQuery(goal);
  run(`I need ${wanted(goal)}. I will search for "${query}".`, `search[${query}]`);
  const p = mode === "first_result" ? openMismatch(w) : openMatch(w, mode === "expert");
  if (p === undefined) return undefined;
  let all = true;
  if (mode !== "no_options")
    for (const [kind, value] of Object.entries(goal.options))
      if (p.options[kind]?.includes(value)) run(`I will choose ${optionPhrase(kind, value)}.`, `click[${value}]`);
      else all = false;
  run(
    mode === "no_options"
      ? "This looks right. I will buy it now."
      : all
        ? "Every option is chosen as asked. I will buy it."
        : "I chose what it offers. I will buy it.",
    "click[Buy Now]",
  );
  return steps;
}
