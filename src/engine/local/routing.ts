/**
 * How the engine spreads work over replicas: splitting items by count or by cost, the fan-out that
 * runs each replica's share of a call and puts the results back in the call's order (fanOut,
 * Shares), and the sampling router.
 */
import { commonPrefix } from "../../util/common-prefix.js";

/** n items over k replicas, as evenly as possible, earlier replicas first. */
export function splitCount(n: number, k: number): number[] {
  return Array.from({ length: k }, (_, i) => Math.floor(n / k) + (i < n % k ? 1 : 0));
}

/**
 * Contiguous index ranges, one per replica, with near-equal total cost
 * (contiguous so each replica's micro-batches keep the caller's packing).
 */
export function splitByCost(costs: number[], k: number): number[][] {
  const parts: number[][] = Array.from({ length: k }, () => []);
  const total = costs.reduce((a, b) => a + b, 0);
  let acc = 0,
    r = 0;
  costs.forEach((c, i) => {
    // Move on once this replica's share is filled, keeping at least the remaining replicas' worth of items.
    while (r < k - 1 && acc + c / 2 > (total * (r + 1)) / k) r++;
    parts[r].push(i);
    acc += c;
  });
  return parts;
}

/**
 * Sends a single-sequence request to the replica whose prefix cache likely
 * holds the longest part of its prompt (it remembers what each replica saw),
 * else to the replica with the fewest sequences in flight.
 */
export class AffinityRouter {
  private seen: number[][][];
  private load: number[];

  constructor(
    replicas: number,
    private readonly memory = 256,
  ) {
    this.seen = Array.from({ length: replicas }, () => []);
    this.load = new Array(replicas).fill(0);
  }

  pick(prompt: number[]): number {
    let best = -1,
      bestLen = Math.min(32, Math.floor(prompt.length / 2));
    this.seen.forEach((contexts, r) => {
      for (const c of contexts) {
        const l = commonPrefix(prompt, c);
        if (l > bestLen) [best, bestLen] = [r, l];
      }
    });
    if (best >= 0) return best;
    let least = 0;
    this.load.forEach((l, r) => l < this.load[least] && (least = r));
    return least;
  }

  started(r: number, n: number): void {
    this.load[r] += n;
  }

  finished(r: number, n: number): void {
    this.load[r] -= n;
  }

  remember(r: number, context: number[]): void {
    const list = this.seen[r];
    list.push(context);
    if (list.length > this.memory) list.shift();
  }
}

/** What each replica returned for its share of a call, put back in the call's order. */
export class Shares<R> {
  constructor(
    /** Per replica, the indices of its items in the call. */
    readonly parts: number[][],
    /** Per replica, its result (undefined for an empty share). */
    readonly results: (R | undefined)[],
    private readonly n: number,
  ) {}

  /** One entry per item, in the call's order, from each result's per-item array. */
  gather<T>(pick: (r: R) => T[]): T[] {
    const out = new Array<T>(this.n);
    this.parts.forEach((idx, r) => {
      const res = this.results[r];
      if (res !== undefined) {
        const rows = pick(res);
        idx.forEach((i, j) => (out[i] = rows[j]));
      }
    });
    return out;
  }

  /** The sum over replicas of a number each result holds. */
  sum(pick: (r: R) => number): number {
    return this.results.reduce((s, r) => s + (r === undefined ? 0 : pick(r)), 0);
  }
}

/**
 * A call spread over `replicas`: items split by their costs (splitByCost), `run` given each
 * non-empty share with its replica's index, all at once.
 */
export async function fanOut<I, R>(
  items: readonly I[],
  costs: number[],
  replicas: number,
  run: (share: I[], replica: number, idx: number[]) => Promise<R>,
): Promise<Shares<R>> {
  const parts = splitByCost(costs, replicas);
  const results = await Promise.all(
    parts.map((idx, r) =>
      idx.length
        ? run(
            idx.map((i) => items[i]),
            r,
            idx,
          )
        : undefined,
    ),
  );
  return new Shares(parts, results, items.length);
}
