/** Length of the common prefix of two token lists, at most `max`. */
export function commonPrefix(a: readonly number[], b: readonly number[], max = Infinity): number {
  const n = Math.min(a.length, b.length, max);
  let i = 0;
  while (i < n && a[i] === b[i]) i++;
  return i;
}
