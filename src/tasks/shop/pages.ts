/**
 * The shop's pages as text, and the buttons each one offers.
 *   home         the search box: only search[...] works there
 *   results      ten products per page ("P1234 title $12.99"), next > / < prev, Back to Search
 *   item         title, price, category, each option kind with its values (the chosen one marked),
 *                the controls Description, Features, Reviews, Buy Now, Back to Search, < Prev
 *   description / features / reviews   one product's text, with Back to Item and Back to Search
 */
import { formatPrice, type Catalogue, type Product } from "./catalogue.js";
import { RESULTS_PER_PAGE } from "./search.js";

export type SubPage = "description" | "features" | "reviews";

export type Page =
  | { kind: "home" }
  | { kind: "results"; query: string; ids: string[]; page: number }
  | { kind: "item"; id: string; chosen: Record<string, string> }
  | { kind: SubPage; id: string; chosen: Record<string, string> };

export const ITEM_CONTROLS = ["Description", "Features", "Reviews", "Buy Now", "Back to Search", "< Prev"] as const;
export const SUB_CONTROLS = ["Back to Item", "Back to Search"] as const;

export const pageCount = (ids: readonly string[]) => Math.max(1, Math.ceil(ids.length / RESULTS_PER_PAGE));

export function pageIds(p: Extract<Page, { kind: "results" }>): string[] {
  return p.ids.slice(p.page * RESULTS_PER_PAGE, (p.page + 1) * RESULTS_PER_PAGE);
}

/** The labels click[...] accepts on the page, in display order (home: none, only search). */
export function clickables(page: Page, catalogue: Catalogue): string[] {
  switch (page.kind) {
    case "home":
      return [];
    case "results": {
      const out = pageIds(page);
      if (page.page + 1 < pageCount(page.ids)) out.push("next >");
      if (page.page > 0) out.push("< prev");
      return [...out, "Back to Search"];
    }
    case "item":
      return [...Object.values(product(catalogue, page.id).options).flat(), ...ITEM_CONTROLS];
    default:
      return [...SUB_CONTROLS];
  }
}

/** The available actions as the prompt lists them. */
export function availableActions(page: Page, catalogue: Catalogue): string[] {
  if (page.kind === "home") return ["search[<query>]"];
  const labels = clickables(page, catalogue);
  // The listed ids are on the page already: one entry stands for them (it keeps the prompt short).
  if (page.kind === "results" && page.ids.length > 0)
    return ["click[<id>]", ...labels.filter((l) => !/^P\d+$/.test(l)).map((c) => `click[${c}]`)];
  return labels.map((c) => `click[${c}]`);
}

export function product(catalogue: Catalogue, id: string): Product {
  const p = catalogue.byId.get(id);
  if (!p) throw new Error(`internal: no product ${id}`);
  return p;
}

export function renderPage(page: Page, catalogue: Catalogue): string {
  switch (page.kind) {
    case "home":
      return "Home. Search the shop with search[<query>].";
    case "results": {
      if (page.ids.length === 0) return `No results for "${page.query}".`;
      const lines = pageIds(page).map((id) => {
        const p = product(catalogue, id);
        return `${p.id} ${p.title} ${formatPrice(p.price)}`;
      });
      return [`Results for "${page.query}", page ${page.page + 1} of ${pageCount(page.ids)}:`, ...lines].join("\n");
    }
    case "item": {
      const p = product(catalogue, page.id);
      const options = Object.entries(p.options).map(
        ([kind, values]) => `${kind}: ${values.map((v) => (page.chosen[kind] === v ? `[${v}]` : v)).join(", ")}`,
      );
      return [
        `[${p.id}] ${p.title}`,
        `Price: ${formatPrice(p.price)} | Category: ${p.category}`,
        ...options,
        "(chosen values in brackets)",
      ].join("\n");
    }
    case "description":
      return `Description of ${page.id}: ${product(catalogue, page.id).description}`;
    case "features":
      return `Features of ${page.id}: ${product(catalogue, page.id).features.join("; ")}.`;
    case "reviews":
      return `Reviews of ${page.id}: ${product(catalogue, page.id).reviews.join(" ")}`;
  }
}
