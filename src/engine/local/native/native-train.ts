/**
 * forwardBackward, computeLogprobs and the critic's passes on the native decoder. Datums are
 * packed into micro-batches by tokens (no padding: a pass takes sequences of any lengths); the
 * loss is Σ c·l with the aggregation coefficients c of the whole call, as on the TF.js engine
 * (../tfjs/policy-train.ts), and its derivative in each logprob (src/rl tokenLossGrad) is where
 * the native backward starts.
 *
 * Shared prefixes (on unless `share` is false, engine.sharedPrefix): the sequences of a call form
 * a prefix forest (../prefix-tree.ts) and a pass runs whole trees, each node once, a node
 * continuing its parent's keys and values. A sequence reads its outputs at the rows of its path;
 * each sequence's loss is its own, as without sharing, and the gradient at a shared row is the sum
 * of the gradients of the sequences that hold it.
 */
import type { Datum } from "../../types.js";
import type { ValueDatum } from "../../types.js";
import { aggregationCoefficients } from "../../../rl/aggregation.js";
import { sequenceLogRatio, tokenLossGrad, type ResolvedLoss } from "../../../rl/policy-loss.js";
import { clipCounts, valueLossAt } from "../../../rl/value-loss.js";
import type { RawForwardBackward, RawValuePass } from "../replica-api.js";
import type { MicroBatchPlanner } from "../../micro-batches.js";
import type { NativeDecoder } from "./decoder.js";
import type { NativeTrainable } from "./native-trainable.js";
import { nodeRows, nodeSlice, prefixForest, separateForest, type PrefixForest } from "../prefix-tree.js";

/** A planner that also says its budget: tokens per micro-batch. */
export type TokenPlanner = MicroBatchPlanner & { readonly maxTokens: number };

/** Consecutive sequences whose total tokens stay within `maxTokens` (a longer one goes alone). */
export function tokenPlanner(maxTokens: number): TokenPlanner {
  const plan: MicroBatchPlanner = (lengths) => {
    const out: number[][] = [];
    let cur: number[] = [],
      sum = 0;
    lengths.forEach((len, i) => {
      if (cur.length > 0 && sum + len > maxTokens) {
        out.push(cur);
        cur = [];
        sum = 0;
      }
      cur.push(i);
      sum += len;
    });
    if (cur.length) out.push(cur);
    return out;
  };
  return Object.assign(plan, { maxTokens });
}

/** One pass of a call: whole trees of its prefix forest. */
export interface TreePass {
  /** The pass's sequences: the tokens of its nodes. */
  seqs: number[][];
  /** Each node's targets, when the call has targets. */
  targets: Int32Array | undefined;
  /** Each node's parent in the pass, or -1; undefined when no node has one. */
  parents: Int32Array | undefined;
  /** The call's sequences in the pass, with the pass's row of each of their positions. */
  members: { index: number; rows: Int32Array }[];
}

/** Some of a call's sequences (`ids`) and their forest: a unit the planner packs whole. */
interface Unit {
  ids: number[];
  forest: PrefixForest;
  rows: number;
}

/**
 * The units of a call: without `share`, every sequence alone; with it, every tree of the prefix
 * forest, and a tree of more than `maxRows` rows cut into runs of its sequences that each fit
 * (each run sharing what its own sequences share).
 */
function callUnits(tokens: number[][], targets: number[][] | undefined, share: boolean, maxRows: number): Unit[] {
  const unit = (ids: number[]): Unit => {
    const t = ids.map((i) => tokens[i]);
    const forest = share ? prefixForest(t, targets && ids.map((i) => targets[i])) : separateForest(t);
    return { ids, forest, rows: nodeRows(forest, forest.nodes.keys()) };
  };
  const live = [...tokens.keys()].filter((i) => tokens[i].length > 0);
  if (!share) return live.map((i) => unit([i]));
  const whole = prefixForest(tokens, targets);
  const treeOf = new Int32Array(whole.nodes.length);
  whole.trees.forEach((nodes, t) => nodes.forEach((n) => (treeOf[n] = t)));
  const byTree: number[][] = whole.trees.map(() => []);
  for (const i of live) byTree[treeOf[whole.paths[i][0]]].push(i);
  return byTree.flatMap((ids, t) => {
    if (nodeRows(whole, whole.trees[t]) <= maxRows) return [unit(ids)];
    const out: Unit[] = [];
    let cur = unit([ids[0]]);
    for (const i of ids.slice(1)) {
      const next = unit([...cur.ids, i]);
      if (next.rows <= maxRows) cur = next;
      else {
        out.push(cur);
        cur = unit([i]);
      }
    }
    out.push(cur);
    return out;
  });
}

/**
 * The passes of a call over `tokens` (per-row `targets` when rows are scored against them): with
 * `share`, trees of the prefix forest packed by their rows (a tree over the planner's budget cut
 * into runs of sequences that fit), else every sequence alone, packed by its length.
 */
export function treePasses(
  tokens: number[][],
  targets: number[][] | undefined,
  plan: MicroBatchPlanner,
  share: boolean,
): TreePass[] {
  const maxRows = "maxTokens" in plan ? (plan as TokenPlanner).maxTokens : Infinity;
  const units = callUnits(tokens, targets, share, maxRows);
  return plan(units.map((u) => u.rows)).map((which) => {
    const seqs: number[][] = [],
      parents: number[] = [],
      nodeTargets: number[] = [],
      members: TreePass["members"] = [];
    let rows = 0;
    for (const { ids, forest } of which.map((u) => units[u])) {
      const first = seqs.length; // the unit's first node in the pass
      const row0: number[] = [];
      const local = ids.map((i) => tokens[i]),
        localTargets = targets && ids.map((i) => targets[i]);
      forest.nodes.forEach((n, k) => {
        row0.push(rows);
        rows += n.length;
        seqs.push(nodeSlice(forest, k, local));
        parents.push(n.parent < 0 ? -1 : first + n.parent);
        if (localTargets) for (const x of nodeSlice(forest, k, localTargets)) nodeTargets.push(x);
      });
      ids.forEach((index, j) => {
        const r = new Int32Array(tokens[index].length);
        for (const k of forest.paths[j]) {
          const { start, length } = forest.nodes[k];
          for (let x = 0; x < length; x++) r[start + x] = row0[k] + x;
        }
        members.push({ index, rows: r });
      });
    }
    return {
      seqs,
      targets: targets && Int32Array.from(nodeTargets),
      parents: parents.some((x) => x >= 0) ? Int32Array.from(parents) : undefined,
      members,
    };
  });
}

export function nativePolicyPass(
  tr: NativeTrainable,
  datums: Datum[],
  loss: ResolvedLoss,
  plan: MicroBatchPlanner,
  coef?: number[][],
  share = true,
): RawForwardBackward {
  coef ??= aggregationCoefficients(datums, loss.aggregation, loss.normalizer);
  const logprobs: number[][] = datums.map(() => []);
  let lossSum = 0,
    entropySum = 0;
  const calls = treePasses(
    datums.map((d) => d.tokens),
    datums.map((d) => d.targetTokens),
    plan,
    share,
  );
  for (const b of calls) {
    const pass = tr.model.forward(b.seqs, true, tr.nextPassSeed(), b.parents);
    try {
      const { logp, entropy } = pass.logprobs(b.targets!, loss.temperature);
      const dlogp = new Float32Array(logp.length);
      for (const { index, rows } of b.members) {
        const d = datums[index],
          c = coef[index];
        const seq = loss.type === "gspo" ? sequenceLogRatio((t) => logp[rows[t]], d.logprobs, d.weights) : undefined;
        for (let t = 0; t < rows.length; t++) {
          if (c[t] === 0) continue;
          const { loss: l, grad } = tokenLossGrad(
            loss,
            logp[rows[t]],
            d.logprobs?.[t] ?? 0,
            d.advantages?.[t] ?? 0,
            d.refLogprobs?.[t] ?? 0,
            seq,
          );
          lossSum += c[t] * l;
          dlogp[rows[t]] += c[t] * grad;
        }
        logprobs[index] = Array.from(rows, (r) => logp[r]);
        for (let t = 0; t < rows.length; t++) if (d.weights[t] > 0) entropySum += entropy[rows[t]];
      }
      pass.backward(dlogp);
      tr.accumulated = true;
    } finally {
      pass.free();
    }
  }
  return { logprobs, lossSum, entropySum };
}

/** Logprobs of each token given the ones before it (entry 0 null). */
export function nativeLogprobs(
  model: NativeDecoder,
  sequences: number[][],
  temperature: number,
  plan: MicroBatchPlanner,
  share = true,
): (number | null)[][] {
  const out: (number | null)[][] = sequences.map(() => [null]);
  // row t predicts token t + 1; the last row of each sequence predicts nothing (target 0)
  const targets = sequences.map((s) => s.map((_, t) => (t + 1 < s.length ? s[t + 1] : 0)));
  for (const b of treePasses(sequences, targets, plan, share)) {
    const pass = model.forward(b.seqs, false, 0, b.parents);
    try {
      const { logp } = pass.logprobs(b.targets!, temperature);
      for (const { index, rows } of b.members) out[index] = [null, ...Array.from(rows.subarray(0, -1), (r) => logp[r])];
    } finally {
      pass.free();
    }
  }
  return out;
}

export function nativeCriticValues(
  model: NativeDecoder,
  sequences: number[][],
  plan: MicroBatchPlanner,
  share = true,
): number[][] {
  const out: number[][] = sequences.map(() => []);
  for (const b of treePasses(sequences, undefined, plan, share)) {
    const pass = model.forward(b.seqs, false, 0, b.parents);
    try {
      const v = pass.values();
      for (const { index, rows } of b.members) out[index] = Array.from(rows, (r) => v[r]);
    } finally {
      pass.free();
    }
  }
  return out;
}

/**
 * The value loss (src/rl/value-loss.ts), ½ · Σ_t w_t / total · max((V - R)², (clip(V) - R)²),
 * and its gradient, accumulated into `tr`.
 */
export function nativeCriticPass(
  tr: NativeTrainable,
  datums: ValueDatum[],
  clip: number,
  total: number,
  plan: MicroBatchPlanner,
  share = true,
): RawValuePass {
  const values: number[][] = datums.map(() => []);
  let lossSum = 0;
  const norm = Math.max(total, 1e-12);
  for (const b of treePasses(
    datums.map((d) => d.tokens),
    undefined,
    plan,
    share,
  )) {
    const pass = tr.model.forward(b.seqs, true, tr.nextPassSeed(), b.parents);
    try {
      const v = pass.values();
      const dv = new Float32Array(v.length);
      for (const { index, rows } of b.members) {
        const d = datums[index];
        values[index] = Array.from(rows, (r) => v[r]);
        for (let t = 0; t < rows.length; t++) {
          const at = valueLossAt(v[rows[t]], d.returns[t], d.weights[t] / norm, clip, d.oldValues?.[t]);
          lossSum += at.loss;
          dv[rows[t]] += at.grad;
        }
      }
      pass.backwardValues(dv);
      tr.accumulated = true;
    } finally {
      pass.free();
    }
  }
  return { values, lossSum, ...clipCounts(datums, values, clip) };
}
