/**
 * The order rows are visited in: a seeded permutation per epoch, and a cursor
 * (epoch, position) that a checkpoint stores, so a resumed run continues with
 * exactly the rows it would have seen.
 */
import { Rng } from "../util/rng.js";

export interface DataCursor {
  epoch: number;
  position: number;
}

export function epochOrder(size: number, seed: number, epoch: number): number[] {
  const order = Array.from({ length: size }, (_, i) => i);
  const rng = new Rng(seed, 1_000_003 + epoch);
  for (let i = size - 1; i > 0; i--) {
    const j = rng.int(i + 1);
    [order[i], order[j]] = [order[j], order[i]];
  }
  return order;
}

/** The next `count` row indices from the cursor, and the cursor after them (wrapping into new epochs). */
export function nextBatch(
  size: number,
  seed: number,
  cursor: DataCursor,
  count: number,
): { indices: number[]; cursor: DataCursor } {
  if (size === 0) throw new Error("the dataset is empty");
  const indices: number[] = [];
  let { epoch, position } = cursor;
  let order = epochOrder(size, seed, epoch);
  while (indices.length < count) {
    if (position >= size) {
      epoch += 1;
      position = 0;
      order = epochOrder(size, seed, epoch);
    }
    indices.push(order[position++]);
  }
  return { indices, cursor: { epoch, position } };
}
