/**
 * How long the Tinker client waits, and why, as the SDK does:
 *  - backoff: a dropped connection, 5xx, or a busy answer (429) to anything but a sample:
 *    min(0.5·2ⁿ, 10) s with jitter, a bounded number of times;
 *  - backpressure: 429 to `asample` means "later", not "failed": 1 s, then 5 s, and again, with no
 *    limit on the attempts (the request's deadline still ends it);
 *  - billing: 402 pauses the client, 5 s at a time, for at most `billingMaxPauseMs` (default 1 h),
 *    with a log line saying why (again each minute while it lasts); any other answer ends the pause;
 *  - poll: `try_again` or 408 asks again at once after a long poll; a server that answers at once
 *    is asked after a short pause that grows (75 ms to 2 s), so a few times a second, not thousands.
 * Every wait goes through a Clock, which tests replace to count waits instead of spending them.
 */

export type WaitReason = "poll" | "backoff" | "backpressure" | "billing";

/** Time as the client sees it: `now` in ms, and `sleep`, which a signal cuts short (rejecting with its reason). */
export interface Clock {
  now(): number;
  sleep(ms: number, reason: WaitReason, signal?: AbortSignal): Promise<void>;
  random(): number;
}

function realSleep(ms: number, _reason: WaitReason, signal?: AbortSignal): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const t = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      reject(signal!.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

export const REAL_CLOCK: Clock = { now: () => Date.now(), sleep: realSleep, random: Math.random };

/** The n-th backoff (0, 1, ...): min(0.5·2ⁿ, 10) s, less up to a quarter at random. */
export function backoffMs(n: number, random: () => number = Math.random): number {
  return Math.min(500 * 2 ** n, 10_000) * (0.75 + 0.25 * random());
}

/** The pause before polling a future again after `n` empty polls in a row (0, 1, ...): 75-100 ms growing to 1.5-2 s. */
export function pollPauseMs(n: number, random: () => number = Math.random): number {
  return Math.min(100 * 1.5 ** n, 2_000) * (0.75 + 0.25 * random());
}

/** The wait before resubmitting a sample the server pushed back on for the n-th time in a row: 1 s, then 5 s. */
export function backpressureMs(n: number): number {
  return n === 0 ? 1_000 : 5_000;
}

/** The SDK's pause between tries while a server refuses for billing. */
export const BILLING_RETRY_MS = 5_000;
/** Default longest billing pause: the SDK's billing_exception_max_pause_duration_sec. */
export const DEFAULT_BILLING_MAX_PAUSE_MS = 3_600_000;
const BILLING_LOG_EVERY_MS = 60_000;

/** The billing pause of one client: started by the first 402, ended by any other answer or by its limit. */
export class BillingPause {
  private since?: number;
  private logged?: number;

  constructor(
    private readonly maxMs: number,
    private readonly clock: Clock,
    private readonly log?: (line: string) => void,
  ) {}

  /** Any answer but a 402: the pause is over. */
  clear(): void {
    this.since = this.logged = undefined;
  }

  /**
   * A 402 to `what`: waits and returns true while the pause may go on; false once it has lasted
   * `maxMs` (the caller fails then).
   */
  async wait(where: string, detail: string, signal?: AbortSignal): Promise<boolean> {
    const now = this.clock.now();
    this.since ??= now;
    if (now - this.since >= this.maxMs) return false;
    if (this.logged === undefined || now - this.logged >= BILLING_LOG_EVERY_MS) {
      this.logged = now;
      this.log?.(
        `tinker: ${where}: the server refuses work for billing (HTTP 402: ${detail}); pausing, trying again every ${BILLING_RETRY_MS / 1000} s for up to ${this.maxMs / 1000} s (engine.tinker.billingPauseS)`,
      );
    }
    await this.clock.sleep(BILLING_RETRY_MS, "billing", signal);
    return true;
  }

  /** How long the pause has lasted, in seconds (for the error once it gives up). */
  seconds(): number {
    return this.since === undefined ? 0 : Math.round((this.clock.now() - this.since) / 1000);
  }
}
