/**
 * Samples the client abandons (a rollout cancelled, a call past its deadline), cancelled on the
 * server so they stop running (and, on a hosted service, being billed) instead of running on until
 * the session expires (SDK 0.31). Whether to, and how many at once, the server says in its dynamic
 * config (`POST /api/v1/client/dynamic_config`): `sample_cancel_enabled`,
 * `sample_cancel_max_batch_size`, and `refresh_interval_sec`, how often the client asks again
 * (refreshIfStale, called with each heartbeat and before each batch of cancels).
 *
 * An abandoned sample's request id is queued; the queue is sent in batches of at most the batch
 * size, each batch's `cancel_future` requests at once. A cancel that fails is logged, not retried
 * past the usual retries: the sample then runs on until the server drops it. A server without the
 * endpoint (404) leaves the defaults: cancelling off.
 */
import { Answer } from "./tinker-answer.js";
import { TinkerAnswerError, TinkerError } from "./tinker-error.js";
import type { TinkerHttp } from "./tinker-http.js";

export interface DynamicConfig {
  /** How often the client asks for it again, in ms. */
  refreshMs: number;
  /** Whether abandoned samples are cancelled. */
  cancelEnabled: boolean;
  /** Cancels sent at once. */
  cancelBatch: number;
}

/** The SDK's defaults, for a server that sends none. */
export const DYNAMIC_DEFAULTS: DynamicConfig = { refreshMs: 300_000, cancelEnabled: false, cancelBatch: 64 };

/** A dynamic config answer, checked; a field left out keeps its default. */
export function readDynamicConfig(raw: Record<string, unknown>, a: Answer): DynamicConfig {
  const refresh = a.optionalInteger(raw, "refresh_interval_sec", 1);
  return {
    refreshMs: refresh !== undefined ? refresh * 1000 : DYNAMIC_DEFAULTS.refreshMs,
    cancelEnabled: a.optionalBoolean(raw, "sample_cancel_enabled") ?? DYNAMIC_DEFAULTS.cancelEnabled,
    cancelBatch: a.optionalInteger(raw, "sample_cancel_max_batch_size", 1) ?? DYNAMIC_DEFAULTS.cancelBatch,
  };
}

export class SampleCanceller {
  config: DynamicConfig = DYNAMIC_DEFAULTS;
  private fetchedAt?: number;
  private refreshing?: Promise<void>;
  private missing = false;
  private readonly queue: string[] = [];
  private draining?: Promise<void>;

  constructor(
    private readonly http: TinkerHttp,
    private readonly sdkVersion: string,
  ) {}

  /** Asks for the dynamic config (once at a time); a failure keeps what was there, with a log line. */
  refresh(): Promise<void> {
    this.refreshing ??= this.fetch().finally(() => (this.refreshing = undefined));
    return this.refreshing;
  }

  /** Asks again once refresh_interval_sec has passed since the last answer. */
  async refreshIfStale(): Promise<void> {
    if (this.missing) return;
    if (this.fetchedAt !== undefined && this.http.clock.now() - this.fetchedAt < this.config.refreshMs) return;
    await this.refresh();
  }

  private async fetch(): Promise<void> {
    const what = "client/dynamic_config";
    try {
      const raw = await this.http.json("/api/v1/client/dynamic_config", { sdk_version: this.sdkVersion }, what);
      this.config = readDynamicConfig(raw, new Answer(this.http.url, what));
    } catch (e) {
      if (e instanceof TinkerError && e.status === 404) {
        this.missing = true; // a server without it: the defaults, and no more asking
        this.http.o.log?.(`tinker: ${this.http.url} has no ${what}; abandoned samples are not cancelled`);
      } else if (e instanceof TinkerAnswerError) throw e;
      else this.http.o.log?.(`tinker: ${what}: ${(e as Error).message}; keeping the last one`);
    } finally {
      this.fetchedAt = this.http.clock.now();
    }
  }

  /** A sample the client will not wait for any more: cancelled on the server if its config says so. */
  abandon(requestId: string): void {
    this.queue.push(requestId);
    this.draining ??= this.drain().finally(() => (this.draining = undefined));
  }

  /** Settles once every queued cancel has been sent (or has failed). */
  async idle(): Promise<void> {
    while (this.draining) await this.draining;
  }

  private async drain(): Promise<void> {
    await this.refreshIfStale().catch(() => undefined);
    while (this.queue.length > 0) {
      const batch = this.queue.splice(0, this.config.cancelBatch);
      if (!this.config.cancelEnabled) continue;
      await Promise.all(batch.map((id) => this.cancel(id)));
    }
  }

  private async cancel(id: string): Promise<void> {
    const what = `cancel_future (request ${id})`;
    try {
      await this.http.json("/api/v1/cancel_future", { request_id: id }, what);
    } catch (e) {
      this.http.o.log?.(
        `tinker: ${this.http.url}: ${what} failed: ${(e as Error).message}; the sample runs on until the server drops it`,
      );
    }
  }
}
