/**
 * Shared prefixes among the sequences of one engine call (a GRPO group's samples share their
 * prompt): a forest of nodes, each a run of positions that one or more sequences hold alike, so a
 * pass computes it once (native/model/model.h: a sequence of a pass may continue a parent).
 *
 * A multi-level radix tree: sequences that agree on their first positions share a node; where
 * they part, each branch continues in a child node, and branches of branches nest (trajectories
 * that share a first turn, then a second). Two positions agree when their tokens agree and, given
 * targets (the token each row is scored against), their targets too: a prompt's last row predicts
 * each sample's first response token, so it stays in the samples' own nodes. A run is shared only
 * when it is at least `minShared` positions long and at least two sequences hold it; shorter
 * common runs are repeated in each branch.
 */

/** One node: positions [start, start + length) of every sequence whose path holds it. */
export interface PrefixNode {
  /** The node this one continues (a lower index), or -1. */
  parent: number;
  /** The position of its first row: its ancestors' total length. */
  start: number;
  length: number;
  /** A sequence whose path holds the node (where its tokens and targets are read). */
  source: number;
}

export interface PrefixForest {
  /** Parents before children. */
  nodes: PrefixNode[];
  /** Per sequence, the nodes covering its positions 0 .. length - 1, root first (empty for an empty sequence). */
  paths: number[][];
  /** Per tree (a root and its descendants), its nodes in index order; trees in order of their roots. */
  trees: number[][];
}

/** Positions shared by default: below this a shared node saves less than it costs to keep apart. */
export const DEFAULT_MIN_SHARED = 16;

/**
 * The forest of `tokens` (and their per-row `targets`, each as long as its sequence): with
 * minShared = Infinity, every sequence is a tree of one node.
 */
export function prefixForest(
  tokens: ArrayLike<number>[],
  targets?: ArrayLike<number>[],
  minShared = DEFAULT_MIN_SHARED,
): PrefixForest {
  const nodes: PrefixNode[] = [];
  const paths: number[][] = tokens.map(() => []);
  targets?.forEach((t, i) => {
    if (t.length !== tokens[i].length)
      throw new Error(`internal: sequence ${i} has ${tokens[i].length} tokens but ${t.length} targets`);
  });
  const key = (s: number, p: number) => tokens[s][p] * 2 ** 32 + (targets ? targets[s][p] >>> 0 : 0);
  const emit = (parent: number, start: number, end: number, source: number) => {
    nodes.push({ parent, start, length: end - start, source });
    return nodes.length - 1;
  };

  /**
   * ids agree on positions [start, cur), which are not yet in any node; `parent` and `path` are
   * the node and nodes before `start`.
   */
  const build = (ids: number[], start: number, cur: number, parent: number, path: number[]): void => {
    if (ids.length === 1) {
      const s = ids[0],
        end = tokens[s].length;
      paths[s] = end > start ? [...path, emit(parent, start, end, s)] : path;
      return;
    }
    let shortest = Infinity;
    for (const s of ids) shortest = Math.min(shortest, tokens[s].length);
    const first = ids[0];
    while (cur < shortest && ids.every((s) => key(s, cur) === key(first, cur))) cur++;
    const ended = ids.filter((s) => tokens[s].length === cur);
    const groups = new Map<number, number[]>(); // by the key at cur, in order of first appearance
    for (const s of ids) {
      if (tokens[s].length === cur) continue;
      const k = key(s, cur);
      const g = groups.get(k);
      if (g) g.push(s);
      else groups.set(k, [s]);
    }
    if (cur - start >= minShared) {
      const node = emit(parent, start, cur, first);
      const below = [...path, node];
      for (const s of ended) paths[s] = below;
      for (const g of groups.values()) build(g, cur, cur, node, below);
    } else {
      for (const s of ended) paths[s] = cur > start ? [...path, emit(parent, start, cur, s)] : path;
      for (const g of groups.values()) build(g, start, cur, parent, path);
    }
  };
  if (tokens.length) build([...tokens.keys()], 0, 0, -1, []);

  const treeOf: number[] = [];
  const trees: number[][] = [];
  nodes.forEach((n, i) => {
    treeOf[i] = n.parent < 0 ? trees.push([]) - 1 : treeOf[n.parent];
    trees[treeOf[i]].push(i);
  });
  return { nodes, paths, trees };
}

/** The forest without sharing: sequence i is node i, a tree of its own (an empty one has no node). */
export function separateForest(tokens: ArrayLike<number>[]): PrefixForest {
  const nodes: PrefixNode[] = [],
    paths: number[][] = [],
    trees: number[][] = [];
  tokens.forEach((t, i) => {
    if (t.length === 0) return void paths.push([]);
    nodes.push({ parent: -1, start: 0, length: t.length, source: i });
    paths.push([nodes.length - 1]);
    trees.push([nodes.length - 1]);
  });
  return { nodes, paths, trees };
}

/** The total positions of a set of nodes. */
export function nodeRows(forest: PrefixForest, nodes: Iterable<number>): number {
  let n = 0;
  for (const i of nodes) n += forest.nodes[i].length;
  return n;
}

/** A node's values of `seqs` (tokens or targets), read from its source sequence. */
export function nodeSlice(forest: PrefixForest, node: number, seqs: ArrayLike<number>[]): number[] {
  const n = forest.nodes[node];
  return Array.prototype.slice.call(seqs[n.source], n.start, n.start + n.length) as number[];
}
