/**
 * Training requests of one model run in `seq_id` order (1, 2, ...), one at a time, as the Tinker
 * SDK numbers them: a request that arrives early waits for the ones before it (up to `waitMs`,
 * then it fails naming the missing number); one that repeats a number already taken is the same
 * request sent again (a retry) when its body is the same, and gets the first one's request id,
 * else a 409.
 *
 * The queue never stays stuck on a number that will not come. A request that fails runs no
 * further but lets the next one go. A request that waits in vain fails, and the queue goes on
 * past it and past the numbers it waited for (a late one gets a 409). A number whose request was
 * refused before it was queued (a 400) is not taken, so a corrected request may still use it; a
 * request waiting only on refused numbers runs, rather than fails, once its wait is over.
 */
import { createHash } from "node:crypto";
import { TinkerError } from "../../engine/remote/tinker-error.js";

type Go = (after: Promise<void>) => Promise<void>;

/** A released (or given up) slot: nothing to run, the queue just moves on. */
const PASS: Go = (after) => after;
/** seq_ids remembered behind the queue (for retries); older ones are forgotten. */
const REMEMBER = 1024;

export class SeqQueue {
  private next = 1;
  private readonly waiting = new Map<number, Go>();
  /** seq_id -> [body digest, request id] of the requests taken and not yet forgotten. */
  private readonly taken = new Map<number, [string, string]>();
  /** seq_ids ahead of the queue whose requests were refused before they were queued. */
  private readonly refusedSeqs = new Set<number>();
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
        `${this.what}: seq_id ${seq} comes after ${this.next - 1} (numbers only go up; one waited for in vain is skipped)`,
        undefined,
        409,
      );
    this.refusedSeqs.delete(seq);
    let go!: Go;
    const result = new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => this.waitedInVain(seq, reject), this.waitMs);
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

  /** Settles once every request released so far has finished (or failed). */
  settled(): Promise<void> {
    return this.lastDone;
  }

  /** `seq`'s request was refused before it was queued: it may be sent again, and is not waited for in vain. */
  refused(seq: number): void {
    if (Number.isSafeInteger(seq) && seq >= this.next && !this.taken.has(seq) && this.refusedSeqs.size < REMEMBER)
      this.refusedSeqs.add(seq);
  }

  /**
   * `seq` waited `waitMs` for the numbers before it. If only refused numbers are missing, it runs;
   * else it fails. Either way the missing numbers are given up on, so the queue goes on.
   */
  private waitedInVain(seq: number, reject: (e: Error) => void): void {
    const go = this.waiting.get(seq);
    if (!go) return;
    const missing: number[] = [];
    for (let k = this.next; k < seq; k++) if (!this.waiting.has(k)) missing.push(k);
    const onlyRefused = missing.every((k) => this.refusedSeqs.has(k));
    for (const k of missing) {
      this.waiting.set(k, PASS);
      this.refusedSeqs.delete(k);
    }
    if (!onlyRefused) {
      this.waiting.set(seq, PASS);
      reject(
        new TinkerError(
          `${this.what}: seq_id ${seq} waited ${this.waitMs / 1000} s for seq_id ${missing[0]}, which never came; the queue goes on after ${seq}`,
          undefined,
          409,
        ),
      );
    }
    this.release();
  }

  /** Releases waiting requests in number order, each after the one before has finished. */
  private release(): void {
    for (let go = this.waiting.get(this.next); go; go = this.waiting.get(this.next)) {
      this.waiting.delete(this.next);
      this.taken.delete(this.next - REMEMBER);
      this.next++;
      this.lastDone = go(this.lastDone);
    }
  }
}
