/** Right-padding ragged rows into one flat (rows x T) array, the layout every batched pass uses. */
export function padRows(rows: readonly (readonly number[])[], T: number): Float32Array {
  const out = new Float32Array(rows.length * T);
  rows.forEach((r, b) => out.set(r, b * T));
  return out;
}

export function padTokenRows(rows: readonly (readonly number[])[], T: number): Int32Array {
  const out = new Int32Array(rows.length * T);
  rows.forEach((r, b) => out.set(r, b * T));
  return out;
}
