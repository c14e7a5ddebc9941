/**
 * The shop simulator: the current page and the actions that move between
 * pages. An action is a command string, `search[query]` or `click[label]`
 * (labels match case-insensitively, spaces trimmed). A command that is
 * malformed or not available on the page changes nothing and says why.
 * Clicking an option value chooses it (replacing the kind's earlier choice);
 * Buy Now ends the episode with the score of the product and the chosen values.
 */
import type { Catalogue } from "./catalogue.js";
import type { Goal } from "./instructions.js";
import { availableActions, clickables, pageCount, product, renderPage, type Page } from "./pages.js";
import { scorePurchase, type PurchaseScore } from "./score.js";
import type { ShopSearch } from "./search.js";

export const MAX_QUERY_CHARS = 200;

export type ActResult =
  | { ok: true; bought?: PurchaseScore & { product: string; chosen: Record<string, string> } }
  | { ok: false; error: string };

export type Command = { verb: "search" | "click"; arg: string };

const norm = (s: string) => s.trim().replace(/\s+/g, " ").toLowerCase();

/** `search[...]` / `click[...]`, or an error saying what is wrong. */
export function parseCommand(text: string): Command | { error: string } {
  const m = /^\s*(search|click)\s*\[([\s\S]*)\]\s*$/i.exec(text);
  if (!m)
    return { error: `malformed command ${JSON.stringify(text.slice(0, 60))}: write search[query] or click[label]` };
  const verb = m[1].toLowerCase() as Command["verb"];
  const arg = m[2].trim();
  if (arg === "")
    return { error: `${verb}[] is empty: put a ${verb === "search" ? "query" : "label"} inside the brackets` };
  return { verb, arg };
}

export class ShopSim {
  private page: Page = { kind: "home" };
  /** The results page an item was opened from (< Prev goes back there). */
  private lastResults?: Extract<Page, { kind: "results" }>;

  constructor(
    private readonly catalogue: Catalogue,
    private readonly engine: ShopSearch,
    readonly goal: Goal,
  ) {}

  get current(): Readonly<Page> {
    return this.page;
  }

  render(): string {
    return renderPage(this.page, this.catalogue);
  }

  actions(): string[] {
    return availableActions(this.page, this.catalogue);
  }

  act(command: string): ActResult {
    const c = parseCommand(command);
    if ("error" in c) return { ok: false, error: c.error };
    const page = this.page;
    if (c.verb === "search") {
      if (page.kind !== "home")
        return { ok: false, error: "search is only available on the home page: click[Back to Search] first" };
      if (c.arg.length > MAX_QUERY_CHARS)
        return { ok: false, error: `the query is longer than ${MAX_QUERY_CHARS} characters` };
      this.page = { kind: "results", query: c.arg, ids: this.engine.search(c.arg), page: 0 };
      return { ok: true };
    }
    const label = clickables(page, this.catalogue).find((l) => norm(l) === norm(c.arg));
    if (label === undefined)
      return {
        ok: false,
        error:
          page.kind === "home"
            ? "nothing can be clicked on the home page: use search[query]"
            : `${JSON.stringify(c.arg.slice(0, 60))} cannot be clicked on this page`,
      };
    if (label === "Back to Search") {
      this.page = { kind: "home" };
      this.lastResults = undefined;
      return { ok: true };
    }
    if (page.kind === "results") {
      if (label === "next >" || label === "< prev") {
        const to = page.page + (label === "next >" ? 1 : -1);
        this.page = { ...page, page: Math.max(0, Math.min(pageCount(page.ids) - 1, to)) };
      } else {
        this.lastResults = page;
        this.page = { kind: "item", id: label, chosen: {} };
      }
      return { ok: true };
    }
    if (page.kind === "item") {
      const p = product(this.catalogue, page.id);
      switch (label) {
        case "Description":
        case "Features":
        case "Reviews":
          this.page = { kind: label.toLowerCase() as "description", id: page.id, chosen: page.chosen };
          return { ok: true };
        case "< Prev":
          this.page = this.lastResults ?? { kind: "home" };
          return { ok: true };
        case "Buy Now": {
          const chosen = { ...page.chosen };
          return { ok: true, bought: { ...scorePurchase(this.goal, p, chosen), product: p.id, chosen } };
        }
      }
      const kind = Object.keys(p.options).find((k) => p.options[k].includes(label))!;
      this.page = { ...page, chosen: { ...page.chosen, [kind]: label } };
      return { ok: true };
    }
    if (page.kind === "home") return { ok: false, error: "internal: a click on the home page" };
    // A sub-page: Back to Item (Back to Search handled above).
    this.page = { kind: "item", id: page.id, chosen: page.chosen };
    return { ok: true };
  }
}
