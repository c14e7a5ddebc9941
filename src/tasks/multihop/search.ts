/**
 * BM25 search over a document list (minisearch: BM25+ with its default
 * parameters k1 = 1.2, b = 0.7, d = 0.5; terms lowercased, split on
 * non-letters; title matches count double). Works over any documents: the
 * synthetic world's, HotpotQA contexts, a BeIR corpus.
 *
 * The tool's text: the top-k documents, one per line, as
 *   "{text}"          when the text already starts with the title, else
 *   "{title}: {text}"
 * each cut to maxDocChars (with "..."); "No results for '{query}'." when nothing matches.
 */
import MiniSearch from "minisearch";
import { z } from "zod";
import { defineTool, type Tool } from "../../agent/tool.js";
import type { SearchDocument } from "../../data/documents.js";
import { InputError } from "../../util/errors.js";

export const DEFAULT_TOP_K = 2;
export const DEFAULT_MAX_DOC_CHARS = 300;
const MAX_QUERY_CHARS = 200;

export interface SearchIndex {
  readonly size: number;
  /** The best `k` documents for the query, best first. */
  search(query: string, k: number): SearchDocument[];
}

export function buildSearchIndex(docs: readonly SearchDocument[]): SearchIndex {
  const byId = new Map<string, SearchDocument>();
  for (const [i, d] of docs.entries()) {
    if (typeof d.id !== "string" || typeof d.title !== "string" || typeof d.text !== "string") {
      throw new InputError(`buildSearchIndex: document ${i} must be { id: string, title: string, text: string }`);
    }
    if (byId.has(d.id))
      throw new InputError(`buildSearchIndex: two documents have id '${d.id}'`, "give each document a unique id");
    byId.set(d.id, d);
  }
  const mini = new MiniSearch<SearchDocument>({
    idField: "id",
    fields: ["title", "text"],
    searchOptions: { boost: { title: 2 } },
  });
  mini.addAll([...byId.values()]);
  return {
    size: byId.size,
    search: (query, k) =>
      mini
        .search(query)
        .slice(0, k)
        .map((r) => byId.get(r.id as string)!),
  };
}

function cut(s: string, max: number): string {
  return s.length <= max ? s : `${s.slice(0, Math.max(0, max - 3)).trimEnd()}...`;
}

export function formatResults(
  query: string,
  docs: readonly SearchDocument[],
  maxDocChars = DEFAULT_MAX_DOC_CHARS,
): string {
  if (docs.length === 0) return `No results for '${query}'.`;
  return docs.map((d) => cut(d.text.startsWith(d.title) ? d.text : `${d.title}: ${d.text}`, maxDocChars)).join("\n");
}

/** The search tool's text for a query (what `searchTool` returns; synchronous, for scripted experts). */
export function searchText(
  index: SearchIndex,
  query: string,
  k = DEFAULT_TOP_K,
  maxDocChars = DEFAULT_MAX_DOC_CHARS,
): string {
  return formatResults(query, index.search(query, k), maxDocChars);
}

export function searchTool(
  index: SearchIndex,
  k = DEFAULT_TOP_K,
  maxDocChars = DEFAULT_MAX_DOC_CHARS,
): Tool<{ query: string }> {
  if (!(Number.isInteger(k) && k >= 1)) throw new InputError(`searchTool: k must be a positive integer, got ${k}`);
  return defineTool({
    name: "search",
    description: "Searches the documents and returns the best matches.",
    inputSchema: z.strictObject({ query: z.string().min(1).max(MAX_QUERY_CHARS) }),
    timeoutMs: 5_000,
    // k lines of at most maxDocChars, plus newlines: never cut by the runtime.
    maxResponseChars: Math.max(k * (maxDocChars + 1), MAX_QUERY_CHARS + 32),
    execute: ({ query }) => searchText(index, query, k, maxDocChars),
  });
}
