/**
 * The scripted expert of the long-horizon questions (task option `hops`) under trained compaction
 * (src/agent/compaction-flow.ts): a policy that reads only its context, as a model does. It searches
 * the entities in the order the question lists them, reading each founding year off the search
 * results in its context; asked for a summary, it writes which entities are left to search and the
 * earliest founded so far; after a compaction it reads that summary back. Played through the real
 * flow (a scripted engine around `longHorizonReply`), its episodes are token-exact demonstrations of
 * summaries, for a warm start (dev/experiments/compaction-warm-start.ts) and for tests.
 */

/** The entities a long-horizon question lists, in order ("Which was founded first: A, B or C?"). */
export function questionNames(text: string): string[] {
  const m = /Which was founded first: (.*?)\?/.exec(text);
  if (!m) throw new Error("internal: no long-horizon question in the context");
  return m[1].split(/, | or /);
}

const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

/** A summary as the expert writes it, and as it reads one back. */
export function summaryText(left: string[], earliest: [string, number] | undefined): string {
  return `Left: ${left.join(", ")}; earliest so far: ${earliest ? `${earliest[0]}=${earliest[1]}` : "none"}.`;
}

const SUMMARY = /Left: (.*?); earliest so far: (?:(.+?)=(\d+)|none)\./g;

/**
 * The expert's next reply (without the end-of-turn token) given the decoded context; `asked`: the
 * context ends with the flow's request for a summary.
 */
export function longHorizonReply(context: string, asked: boolean, write: (query: string) => string): string {
  const names = questionNames(context);
  const summaries = [...context.matchAll(SUMMARY)];
  const last = summaries[summaries.length - 1];
  const years = new Map<string, number>(last?.[2] !== undefined ? [[last[2], Number(last[3])]] : []);
  const left = last ? last[1].split(", ").filter((n) => n !== "") : names;
  const checked = new Set(names.filter((n) => !left.includes(n)));
  for (const n of names) {
    const doc = new RegExp(`${escape(n)} is a (?:company|city in [^\\n]*? It was) founded in (\\d+)`).exec(context);
    if (!doc) continue;
    years.set(n, Number(doc[1]));
    checked.add(n);
  }
  let best: [string, number] | undefined;
  for (const y of years) if (!best || y[1] < best[1]) best = y;
  if (asked)
    return summaryText(
      names.filter((n) => !checked.has(n)),
      best,
    );
  const next = names.find((n) => !checked.has(n));
  if (next === undefined) return `<think>${best![0]} was founded first.</think>\n<answer>${best![0]}</answer>`;
  return `<think>Find when ${next} was founded.</think>\n${write(next)}`;
}
