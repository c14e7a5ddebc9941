/**
 * The scripted expert of the long-horizon questions (task option `hops`) under trained compaction
 * (src/agent/compaction-flow.ts): a policy that reads only its context, as a model does. It searches
 * the entities in the order the question lists them, reading each founding year off the search
 * results in its context; asked for a summary, it writes one in its style; after a compaction it
 * reads that summary back. Played through the real flow (a scripted engine around
 * `longHorizonReply`), its episodes are token-exact demonstrations of summaries, for a warm start
 * (dev/experiments/compaction-warm-start.ts) and for tests.
 *
 * Two summary styles:
 * - `earliest`: which entities are left to search and the earliest founded so far
 *   (`Left: D, E; earliest so far: B=1880.`): short, but each summary must pick a minimum and copy
 *   the name that goes with it;
 * - `ledger`: every year found, in the question's order, year first (`Found: 1910 A, 1880 B.`); each
 *   turn after a search first notes what it found (`<think>1880 B. Find when C was founded.</think>`),
 *   and the answer names the earliest year before its entity (`The earliest is 1880 B.`). Longer,
 *   but every piece is a copy (the question's names in order, a year from the search result just
 *   read, the notes and the last ledger) except one comparison of years in the answer; and a name
 *   always follows its year, so the year found keys the copy of the name.
 */

export type SummaryStyle = "earliest" | "ledger";
export const SUMMARY_STYLES: readonly SummaryStyle[] = ["earliest", "ledger"];

/** The entities a long-horizon question lists, in order ("Which was founded first: A, B or C?"). */
export function questionNames(text: string): string[] {
  const m = /Which was founded first: (.*?)\?/.exec(text);
  if (!m) throw new Error("internal: no long-horizon question in the context");
  return m[1].split(/, | or /);
}

const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

/** An `earliest` summary as the expert writes it, and as it reads one back. */
export function summaryText(left: string[], earliest: [string, number] | undefined): string {
  return `Left: ${left.join(", ")}; earliest so far: ${earliest ? `${earliest[0]}=${earliest[1]}` : "none"}.`;
}

const yearFirst = (pairs: [string, number][]) => pairs.map(([n, y]) => `${y} ${n}`).join(", ");

/** A `ledger` summary: the years found, in the question's order. */
export function ledgerText(found: [string, number][]): string {
  return `Found: ${found.length ? yearFirst(found) : "none"}.`;
}
const EARLIEST = /Left: (.*?); earliest so far: (?:(.+?)=(\d+)|none)\./g;
/** A ledger summary in a context; group 1 is its body (`1910 A, 1880 B` or `none`). */
export const LEDGER = /Found: (.*?)\.(?=<|$|\n)/g;

/** The year-name pairs of a ledger's body or a note (`1910 A, 1880 B`); `none`, and entries without a leading year, give none. */
export function ledgerPairs(body: string): [string, number][] {
  return body.split(", ").flatMap((p): [string, number][] => {
    const i = p.indexOf(" ");
    return i > 0 && /^\d+$/.test(p.slice(0, i)) ? [[p.slice(i + 1), Number(p.slice(0, i))]] : [];
  });
}

/** What the last summary in the context says: the years it carries and the entities it has checked. */
function lastSummary(context: string, names: string[]): { years: Map<string, number>; checked: Set<string> } {
  const earliest = [...context.matchAll(EARLIEST)].at(-1);
  const ledger = [...context.matchAll(LEDGER)].at(-1);
  if (ledger && (!earliest || ledger.index > earliest.index)) {
    const pairs = ledgerPairs(ledger[1]);
    return { years: new Map(pairs), checked: new Set(pairs.map((p) => p[0])) };
  }
  if (!earliest) return { years: new Map(), checked: new Set() };
  const years = new Map<string, number>(earliest[2] !== undefined ? [[earliest[2], Number(earliest[3])]] : []);
  const left = earliest[1].split(", ").filter((n) => n !== "");
  return { years, checked: new Set(names.filter((n) => !left.includes(n))) };
}

/**
 * The expert's next reply (without the end-of-turn token) given the decoded context; `asked`: the
 * context ends with the flow's request for a summary.
 */
export function longHorizonReply(
  context: string,
  asked: boolean,
  write: (query: string) => string,
  style: SummaryStyle = "earliest",
): string {
  const names = questionNames(context);
  const { years, checked } = lastSummary(context, names);
  for (const n of names) {
    const doc = new RegExp(`${escape(n)} is a (?:company|city in [^\\n]*? It was) founded in (\\d+)`).exec(context);
    if (!doc) continue;
    years.set(n, Number(doc[1]));
    checked.add(n);
  }
  let best: [string, number] | undefined;
  for (const y of years) if (!best || y[1] < best[1]) best = y;
  const inOrder = (keep: (n: string) => boolean) =>
    names.filter((n) => years.has(n) && keep(n)).map((n): [string, number] => [n, years.get(n)!]);
  if (asked)
    return style === "ledger"
      ? ledgerText(inOrder(() => true))
      : summaryText(
          names.filter((n) => !checked.has(n)),
          best,
        );
  // What the last search result showed, noted year first (ledger style).
  const lastCall = context.lastIndexOf("</tool_call>");
  const fresh = context.slice(lastCall);
  const noted = style === "ledger" && lastCall >= 0 ? inOrder((n) => fresh.includes(`${n} is a`)) : [];
  const note = noted.length ? `${yearFirst(noted)}. ` : "";
  const next = names.find((n) => !checked.has(n));
  if (next === undefined)
    return style === "ledger"
      ? `<think>${note}The earliest is ${best![1]} ${best![0]}.</think>\n<answer>${best![0]}</answer>`
      : `<think>${best![0]} was founded first.</think>\n<answer>${best![0]}</answer>`;
  return `<think>${note}Find when ${next} was founded.</think>\n${write(next)}`;
}
