/**
 * Group bookkeeping shared by the group-relative estimators and the filters.
 * A group is the set of trajectories sampled from one prompt (Agent-R1's `uid`).
 * Keys compare with `Map` semantics: 1 and "1" are different groups.
 */
export type GroupKey = string | number;

/** Members of each group, as indices into the batch, in batch order; groups in first-seen order. */
export function groupMembers(groups: readonly GroupKey[]): Map<GroupKey, number[]> {
  const members = new Map<GroupKey, number[]>();
  groups.forEach((g, i) => {
    const list = members.get(g);
    if (list) list.push(i);
    else members.set(g, [i]);
  });
  return members;
}

/** Summed relative to the first value, so equal values give exactly that value (a uniform group centers to exact zeros). */
export function mean(xs: readonly number[]): number {
  if (xs.length === 0) return 0;
  let s = 0;
  for (const x of xs) s += x - xs[0];
  return xs[0] + s / xs.length;
}
