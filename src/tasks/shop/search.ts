/**
 * The shop's search engine: BM25 over the catalogue (the multi-hop task's
 * index, minisearch BM25+), one document per product: its title (boosted)
 * and a text of category, type, description and features. A query returns
 * at most 50 products, best first (five result pages of ten).
 */
import type { SearchDocument } from "../../data/documents.js";
import { buildSearchIndex, type SearchIndex } from "../multihop/search.js";
import type { Catalogue, Product } from "./catalogue.js";

export const MAX_RESULTS = 50;
export const RESULTS_PER_PAGE = 10;

export function productDocument(p: Product): SearchDocument {
  return { id: p.id, title: p.title, text: `${p.category} ${p.type}. ${p.description} ${p.features.join(". ")}` };
}

export interface ShopSearch {
  /** Product ids for the query, best first, at most MAX_RESULTS. */
  search(query: string): string[];
}

export function buildShopSearch(catalogue: Catalogue): ShopSearch {
  const index: SearchIndex = buildSearchIndex(catalogue.products.map(productDocument));
  const cache = new Map<string, string[]>();
  return {
    search(query) {
      const key = query.trim().toLowerCase();
      let ids = cache.get(key);
      if (!ids) {
        ids = index.search(key, MAX_RESULTS).map((d) => d.id);
        if (cache.size > 5000) cache.clear();
        cache.set(key, ids);
      }
      return ids.slice();
    },
  };
}
