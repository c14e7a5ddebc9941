/**
 * The rollout producer of asynchronous training: a bounded producer/consumer between the rollout
 * and the learner. One loop produces the batches of iterations first..last in order, one at a time,
 * and starts batch i only once the learner has finished the update of iteration i − 1 − lookahead
 * (staleness.ts says why that bounds staleness); the learner takes batch i when it begins
 * iteration i, waiting if it is not ready. So at most `lookahead` batches are ever started ahead of
 * the one the learner is on.
 *
 * The loop stops at the first batch that fails (the learner gets the error when it takes that
 * batch) or when `stop` is called: that aborts the batch in production (its signal) and waits for
 * it to settle; a batch taken after the stop is refused. The producer knows nothing of models or
 * rows: `produce(iteration, signal)` does the work.
 */
import { setMaxListeners } from "node:events";

export interface Produced<B> {
  value: B;
  /** How long the producer waited for the learner before it could start this batch, ms. */
  producerWaitMs: number;
}

export interface Taken<B> extends Produced<B> {
  /** How long the learner waited for this batch, ms. */
  learnerWaitMs: number;
}

export interface ProducerOptions<B> {
  first: number;
  last: number;
  /** Batches that may be started beyond the one the learner is on. */
  lookahead: number;
  produce: (iteration: number, signal: AbortSignal) => Promise<B>;
}

interface Slot<B> {
  promise: Promise<Produced<B>>;
  resolve: (p: Produced<B>) => void;
  reject: (e: unknown) => void;
  settled: boolean;
}

export class RolloutProducer<B> {
  /** The last iteration whose update the learner has finished. */
  private learnerDone: number;
  private readonly slots = new Map<number, Slot<B>>();
  private readonly abort = new AbortController();
  private wake: (() => void) | undefined;
  private ended: { reason: unknown } | undefined;
  private running: Promise<void> | undefined;
  /** The loop has returned: no slot will be filled any more. */
  private loopOver = false;

  constructor(private readonly o: ProducerOptions<B>) {
    this.learnerDone = o.first - 1;
    setMaxListeners(0, this.abort.signal); // every sample call in flight listens to it
  }

  /** Starts the loop (once). */
  start(): void {
    this.running ??= this.loop();
  }

  /** The batch of `iteration`, once produced (the learner calls this in order). */
  async take(iteration: number): Promise<Taken<B>> {
    this.start();
    const t0 = performance.now();
    const got = await this.slot(iteration).promise;
    return { ...got, learnerWaitMs: performance.now() - t0 };
  }

  /** The learner has finished the update of `iteration`: batches up to iteration + 1 + lookahead may start. */
  finished(iteration: number): void {
    this.learnerDone = Math.max(this.learnerDone, iteration);
    this.wake?.();
  }

  /** Stops producing: the batch in production is aborted and awaited; nothing starts after it. */
  async stop(): Promise<void> {
    if (!this.ended) this.ended = { reason: new Error("the rollout producer was stopped") };
    this.abort.abort(this.ended.reason);
    this.wake?.();
    await this.running;
    this.refuseWaiting();
  }

  private async loop(): Promise<void> {
    for (let it = this.o.first; it <= this.o.last && !this.ended; it++) {
      const t0 = performance.now();
      await this.windowOpen(it);
      if (this.ended) break;
      const slot = this.slot(it);
      const producerWaitMs = performance.now() - t0;
      try {
        const value = await this.o.produce(it, this.abort.signal);
        settle(slot, () => slot.resolve({ value, producerWaitMs }));
      } catch (e) {
        this.ended ??= { reason: e };
        settle(slot, () => slot.reject(e));
      }
    }
    this.ended ??= { reason: new Error(`the rollout producer has no batch after iteration ${this.o.last}`) };
    this.loopOver = true;
    this.refuseWaiting();
  }

  /** Resolves once batch `it` may start (or the producer is stopping). */
  private async windowOpen(it: number): Promise<void> {
    while (!this.ended && this.learnerDone < it - 1 - this.o.lookahead)
      await new Promise<void>((go) => (this.wake = go));
    this.wake = undefined;
  }

  private slot(it: number): Slot<B> {
    let s = this.slots.get(it);
    if (!s) {
      let resolve!: Slot<B>["resolve"], reject!: Slot<B>["reject"];
      const promise = new Promise<Produced<B>>((res, rej) => ((resolve = res), (reject = rej)));
      promise.catch(() => undefined); // the learner sees the rejection when it takes the batch
      s = { promise, resolve, reject, settled: false };
      this.slots.set(it, s);
      if (this.loopOver) settle(s, () => s!.reject(this.ended!.reason));
    }
    return s;
  }

  /** Once the loop has ended, batches nobody will produce are refused. */
  private refuseWaiting(): void {
    for (const s of this.slots.values()) if (!s.settled) settle(s, () => s.reject(this.ended!.reason));
  }
}

function settle<B>(slot: Slot<B>, fn: () => void): void {
  if (slot.settled) return;
  slot.settled = true;
  fn();
}
