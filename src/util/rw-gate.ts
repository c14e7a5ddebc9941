/**
 * A shared/exclusive gate for async work: any number of shared holders at once, or one exclusive
 * holder alone. Waiters are served in arrival order, and a waiting exclusive request holds back
 * the shared ones that come after it, so a steady stream of shared work (sampling) never starves
 * the exclusive one (a training pass, an optimizer step). A request that can go at once goes
 * without waiting a tick. Not reentrant: an exclusive holder that asks again waits for itself.
 */

interface Waiter {
  exclusive: boolean;
  go: () => void;
}

export class RwGate {
  private sharedHolders = 0;
  private exclusiveHeld = false;
  private readonly waiters: Waiter[] = [];

  /** Runs `fn` beside other shared holders, never beside an exclusive one. */
  shared<T>(fn: () => Promise<T>): Promise<T> {
    return this.run(false, fn);
  }

  /** Runs `fn` alone: after every holder before it has finished, and before anything after it starts. */
  exclusive<T>(fn: () => Promise<T>): Promise<T> {
    return this.run(true, fn);
  }

  /** Holders now and requests waiting (tests, metrics). */
  get state(): { shared: number; exclusive: boolean; waiting: number } {
    return { shared: this.sharedHolders, exclusive: this.exclusiveHeld, waiting: this.waiters.length };
  }

  private async run<T>(exclusive: boolean, fn: () => Promise<T>): Promise<T> {
    if (!this.grantNow(exclusive)) await new Promise<void>((go) => this.waiters.push({ exclusive, go }));
    try {
      return await fn();
    } finally {
      if (exclusive) this.exclusiveHeld = false;
      else this.sharedHolders--;
      this.wake();
    }
  }

  /** Takes the gate when nothing waits ahead and the holders allow it. */
  private grantNow(exclusive: boolean): boolean {
    if (this.waiters.length > 0 || this.exclusiveHeld) return false;
    if (exclusive && this.sharedHolders > 0) return false;
    if (exclusive) this.exclusiveHeld = true;
    else this.sharedHolders++;
    return true;
  }

  /** Lets waiters in from the front: a run of shared ones together, or one exclusive one alone. */
  private wake(): void {
    while (this.waiters.length > 0 && !this.exclusiveHeld) {
      const head = this.waiters[0];
      if (head.exclusive && this.sharedHolders > 0) return;
      this.waiters.shift();
      if (head.exclusive) this.exclusiveHeld = true;
      else this.sharedHolders++;
      head.go();
    }
  }
}
