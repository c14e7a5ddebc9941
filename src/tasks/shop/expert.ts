/**
 * The scripted expert: searches the instruction's key words (its attributes
 * and product type), pages through the results until the target product is
 * listed, opens it, chooses the wanted value of each option kind, and buys.
 * Each step has a short thought. Mistakes (demonstrations at rate 1 - quality):
 *   "first_result"  opens the first listed product other than the target, chooses what it can, buys
 *   "no_options"    opens the target and buys it without choosing any option
 * The plan is played on a simulator as it is made, so every command is one
 * the page offers.
 */
import { formatPrice, type Catalogue } from "./catalogue.js";
import { goalQuery, optionPhrase, type Goal } from "./instructions.js";
import { pageIds, product } from "./pages.js";
import type { ShopSearch } from "./search.js";
import { ShopSim } from "./simulator.js";

export const SHOP_MISTAKES = ["first_result", "no_options"] as const;
export type ShopMode = "expert" | (typeof SHOP_MISTAKES)[number];

export interface ExpertStep {
  thought: string;
  command: string;
}

/** The expert's steps for a goal, or undefined when its search never lists the target (or the mode cannot apply). */
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
  const what = `${goal.attributes.join(" and ")} ${goal.type}`;
  const query = goalQuery(goal);
  run(`I need ${what}. I will search for "${query}".`, `search[${query}]`);
  let page = sim.current;
  if (page.kind !== "results") return undefined;
  let pick: string | undefined;
  if (mode === "first_result") {
    pick = page.ids.find((id) => id !== goal.target);
  } else {
    if (!page.ids.includes(goal.target)) return undefined;
    while (page.kind === "results" && !pageIds(page).includes(goal.target)) {
      run(`No product on this page is ${what} within the budget. I will look at the next page.`, "click[next >]");
      page = sim.current;
    }
    pick = goal.target;
  }
  if (pick === undefined) return undefined;
  const p = product(catalogue, pick);
  run(
    mode === "first_result"
      ? `${p.id} is the first result. I will open it.`
      : `${p.id} is ${p.attributes.join(" and ")} ${p.type} at ${formatPrice(p.price)}, under ${goal.budget} dollars. I will open it.`,
    `click[${p.id}]`,
  );
  if (mode !== "no_options")
    for (const [kind, value] of Object.entries(goal.options))
      if (p.options[kind]?.includes(value)) run(`I will choose ${optionPhrase(kind, value)}.`, `click[${value}]`);
  run(
    mode === "no_options" ? "This looks right. I will buy it now." : "Every option is chosen as asked. I will buy it.",
    "click[Buy Now]",
  );
  return steps;
}
