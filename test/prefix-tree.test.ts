/**
 * The prefix forest of one engine call (src/engine/local/prefix-tree.ts): which positions are
 * shared, by whom, and how every sequence's path covers it; exact.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import {
  nodeRows,
  nodeSlice,
  prefixForest,
  separateForest,
  type PrefixForest,
} from "../src/engine/local/prefix-tree.js";

const range = (from: number, n: number) => Array.from({ length: n }, (_, i) => from + i);

/** Every path covers its sequence in order with the sequence's own tokens; parents come first. */
function checkCover(f: PrefixForest, tokens: number[][], targets?: number[][]): void {
  f.nodes.forEach((n, i) => {
    assert.ok(n.parent < i, `node ${i}: parent ${n.parent} after it`);
    assert.ok(n.length > 0);
    assert.equal(n.start, n.parent < 0 ? 0 : f.nodes[n.parent].start + f.nodes[n.parent].length);
  });
  tokens.forEach((s, i) => {
    const path = f.paths[i];
    path.forEach((n, k) => assert.equal(f.nodes[n].parent, k === 0 ? -1 : path[k - 1]));
    assert.deepEqual(
      path.flatMap((n) => nodeSlice(f, n, tokens)),
      s,
    );
    if (targets)
      assert.deepEqual(
        path.flatMap((n) => nodeSlice(f, n, targets)),
        targets[i],
      );
  });
  assert.deepEqual(
    f.trees.flat().sort((a, b) => a - b),
    range(0, f.nodes.length),
  );
}

test("a GRPO group: the prompt once, each sample's response (and the prompt's last row) its own", () => {
  const prompt = range(100, 40);
  const tokens = [0, 1, 2].map((k) => [...prompt, ...range(10 * k, 5 + k)]);
  const targets = tokens.map((s) => [...s.slice(1), 0]);
  const f = prefixForest(tokens, targets, 16);
  checkCover(f, tokens, targets);
  assert.deepEqual(f.nodes, [
    { parent: -1, start: 0, length: 39, source: 0 },
    { parent: 0, start: 39, length: 6, source: 0 },
    { parent: 0, start: 39, length: 7, source: 1 },
    { parent: 0, start: 39, length: 8, source: 2 },
  ]);
  assert.deepEqual(f.paths, [
    [0, 1],
    [0, 2],
    [0, 3],
  ]);
  assert.deepEqual(f.trees, [[0, 1, 2, 3]]);
  assert.equal(nodeRows(f, f.trees[0]), 39 + 6 + 7 + 8);
  // without targets (values) the last prompt row is shared too
  const g = prefixForest(tokens, undefined, 16);
  checkCover(g, tokens);
  assert.equal(g.nodes[0].length, 40);
});

test("nested prefixes: a shared first turn, shared second turns below it, a sequence ending on a node", () => {
  const t1 = range(100, 20),
    a = range(200, 16),
    b = range(300, 18);
  const tokens = [
    [...t1, ...a, 1, 2],
    [...t1, ...b, 3],
    [...t1, ...a, 4],
    [...t1, ...b, 5, 6],
    [...t1, ...a], // ends where the shared [t1, a] ends
    [7, 8, 9],
  ];
  const f = prefixForest(tokens, undefined, 16);
  checkCover(f, tokens);
  assert.deepEqual(
    f.nodes.map((n) => [n.parent, n.start, n.length]),
    [
      [-1, 0, 20], // t1
      [0, 20, 16], // a
      [1, 36, 2],
      [1, 36, 1],
      [0, 20, 18], // b
      [4, 38, 1],
      [4, 38, 2],
      [-1, 0, 3],
    ],
  );
  assert.deepEqual(f.paths, [[0, 1, 2], [0, 4, 5], [0, 1, 3], [0, 4, 6], [0, 1], [7]]);
  assert.deepEqual(f.trees, [[0, 1, 2, 3, 4, 5, 6], [7]]);
});

test("short common runs stay in the branches, and are shared once a longer run follows", () => {
  const tokens = [
    [...range(1, 10), ...range(50, 3)],
    [...range(1, 10), ...range(60, 3)],
    [...range(1, 20), 7],
    [...range(1, 20), 8],
  ];
  const f = prefixForest(tokens, undefined, 16);
  checkCover(f, tokens);
  // 0 and 1 share 10 positions (too few): apart; 2 and 3 share 20: one node
  assert.deepEqual(
    f.nodes.map((n) => [n.parent, n.start, n.length, n.source]),
    [
      [-1, 0, 13, 0],
      [-1, 0, 13, 1],
      [-1, 0, 20, 2],
      [2, 20, 1, 2],
      [2, 20, 1, 3],
    ],
  );
  // with a lower minimum everything with a common beginning shares
  const g = prefixForest(tokens, undefined, 4);
  checkCover(g, tokens);
  assert.deepEqual(g.nodes[0], { parent: -1, start: 0, length: 10, source: 0 });
  assert.equal(g.trees.length, 1);
});

test("a target that differs ends sharing; identical sequences share everything; a lone sequence is one node", () => {
  const tokens = [range(1, 30), range(1, 30), range(1, 30)];
  const targets = [range(2, 30), range(2, 30), [...range(2, 20), ...range(90, 10)]];
  const f = prefixForest(tokens, targets, 16);
  checkCover(f, tokens, targets);
  assert.deepEqual(
    f.nodes.map((n) => [n.parent, n.start, n.length]),
    [
      [-1, 0, 20],
      [0, 20, 10],
      [0, 20, 10],
      [0, 20, 10],
    ],
  );
  // 0 and 1 agree on their last 10 positions too, below the minimum: apart
  assert.deepEqual(f.paths, [
    [0, 1],
    [0, 2],
    [0, 3],
  ]);
  const same = prefixForest([range(1, 30), range(1, 30)]);
  assert.deepEqual(same.nodes, [{ parent: -1, start: 0, length: 30, source: 0 }]);
  assert.deepEqual(same.paths, [[0], [0]]);
  const one = prefixForest([range(0, 50)]);
  assert.deepEqual(one.nodes, [{ parent: -1, start: 0, length: 50, source: 0 }]);
  const empty = prefixForest([[], range(0, 3)]);
  assert.deepEqual(empty.paths, [[], [0]]);
  assert.deepEqual(prefixForest([]), { nodes: [], paths: [], trees: [] });
});

test("separateForest: every sequence a tree of its own, in order", () => {
  const tokens = [range(0, 20), range(0, 20), [], [5]];
  const f = separateForest(tokens);
  checkCover(f, tokens);
  assert.deepEqual(f.paths, [[0], [1], [], [2]]);
  assert.deepEqual(f.trees, [[0], [1], [2]]);
  assert.throws(() => prefixForest([range(0, 3)], [range(0, 2)]), /3 tokens but 2 targets/);
});
