/**
 * Training requests of one model run in `seq_id` order (1, 2, ...), one at a time, as the Tinker
 * SDK numbers them: a request that arrives early waits for the ones before it (up to `waitMs`,
 * then it fails naming the missing number); one that repeats a number already taken is the same
 * request sent again (a retry) when its body is the same, and gets the first one's request id,
 * else a 409.
 */
import { createHash } from "node:crypto";
import { TinkerError } from "../../engine/remote/tinker-error.js";

type Go = (after: Promise<void>) => Promise<void>;

export class SeqQueue {
  private next = 1;
  private readonly waiting = new Map<number, Go>();
  /** seq_id -> [body digest, request id] of every request taken. */
  private readonly taken = new Map<number, [string, string]>();
  /** Settles when the last released request has finished. */
  private lastDone: Promise<void> = Promise.resolve();

  constructor(
    private readonly what: string,
    private readonly waitMs = 120_000,
  ) {}

  /**
   * Registers request `seq` and returns its request id. `start(run)` makes the future (and returns
   * its id); `run()` resolves with `work()`'s result once every request before `seq` has finished.
   */
  submit<T>(
    seq: number,
    body: string | Uint8Array,
    work: () => Promise<T>,
    start: (run: () => Promise<T>) => string,
  ): string {
    if (!Number.isSafeInteger(seq) || seq < 1)
      throw new TinkerError(`${this.what}: seq_id must be an integer >= 1, got ${seq}`);
    const digest = createHash("sha256").update(body).digest("hex");
    const seen = this.taken.get(seq);
    if (seen) {
      if (seen[0] === digest) return seen[1];
      throw new TinkerError(`${this.what}: seq_id ${seq} was already used by another request`, undefined, 409);
    }
    if (seq < this.next)
      throw new TinkerError(
        `${this.what}: seq_id ${seq} comes after ${this.next - 1} (numbers only go up)`,
        undefined,
        409,
      );
    let go!: Go;
    const result = new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiting.delete(seq);
        reject(
          new TinkerError(
            `${this.what}: seq_id ${seq} waited ${this.waitMs / 1000} s for seq_id ${this.next}, which never came`,
            undefined,
            409,
          ),
        );
      }, this.waitMs);
      timer.unref();
      go = (after) => {
        clearTimeout(timer);
        const p = after.then(work);
        p.then(resolve, reject);
        return p.then(
          () => undefined,
          () => undefined,
        );
      };
    });
    result.catch(() => undefined);
    this.waiting.set(seq, go);
    const id = start(() => result);
    this.taken.set(seq, [digest, id]);
    this.release();
    return id;
  }

  /** Releases waiting requests in number order, each after the one before has finished. */
  private release(): void {
    for (let go = this.waiting.get(this.next); go; go = this.waiting.get(this.next)) {
      this.waiting.delete(this.next);
      this.next++;
      this.lastDone = go(this.lastDone);
    }
  }
}
