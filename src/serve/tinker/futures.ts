/**
 * The futures of `serve --tinker`: each compute request gets a request id at once and runs; a
 * client polls `retrieve_future`, which waits (long-polls) up to a limit for the result. A settled
 * future is kept for `keepMs` after it settles, so a client whose poll was cut can ask again; after
 * that its id answers 410, as Tinker's "promise expired" (for the last 100,000 expired ids; older
 * ones are forgotten and answer 404, so the record of them does not grow without end).
 *
 * A future's work gets an AbortSignal: `cancel` (the protocol's cancel_future) aborts a running
 * one, which then fails as cancelled (category user); `onSettled` hears when each one settles
 * (a sampling session's completion log, session-futures.ts).
 */
import { randomUUID } from "node:crypto";
import { TinkerError } from "../../engine/remote/tinker-error.js";
import { AgentR1Error } from "../../util/errors.js";

/** What a future's result is, for its encoding: JSON, or protobuf where the client asks for it. */
export type ResultKind = "json" | "sample" | "forward_backward";

export type Settled = { ok: true; kind: ResultKind; value: unknown } | { ok: false; error: string; category: string };

interface Entry {
  kind: ResultKind;
  settled?: Settled;
  done: Promise<void>;
  expires?: number;
  controller: AbortController;
}

/** Expired ids remembered for their 410. */
const REMEMBER_EXPIRED = 100_000;

export class Futures {
  private readonly entries = new Map<string, Entry>();
  private readonly expired = new Set<string>();

  constructor(private readonly keepMs = 10 * 60_000) {}

  /** Starts `work` and returns the id its result will be found under; `onSettled` hears whether it succeeded. */
  start(kind: ResultKind, work: (signal: AbortSignal) => Promise<unknown>, onSettled?: (ok: boolean) => void): string {
    this.sweep();
    const id = `req-${randomUUID()}`;
    const entry: Entry = { kind, done: Promise.resolve(), controller: new AbortController() };
    entry.done = work(entry.controller.signal).then(
      (value) => {
        entry.settled = { ok: true, kind, value };
      },
      (e: unknown) => {
        const category = e instanceof AgentR1Error ? "user" : "server";
        entry.settled = { ok: false, error: e instanceof Error ? e.message : String(e), category };
      },
    );
    entry.done.then(() => {
      entry.expires = Date.now() + this.keepMs;
      onSettled?.(entry.settled!.ok);
    });
    this.entries.set(id, entry);
    return id;
  }

  /** What kind of result `id` is, or undefined for an id this server does not hold. */
  kindOf(id: string): ResultKind | undefined {
    return this.entries.get(id)?.kind;
  }

  /** Aborts the work of `id` if it still runs; returns whether it did. An unknown id: 404. */
  cancel(id: string): boolean {
    const entry = this.entries.get(id);
    if (!entry)
      throw new TinkerError(`no request ${id} on this server (was it restarted, or long done?)`, undefined, 404);
    if (entry.settled) return false;
    entry.controller.abort(new TinkerError(`request ${id} was cancelled (cancel_future)`));
    return true;
  }

  /** The result, or undefined if it is not ready within `waitMs`. Unknown ids: 404; expired: 410. */
  async retrieve(id: string, waitMs: number): Promise<Settled | undefined> {
    const entry = this.entries.get(id);
    if (!entry) {
      if (this.expired.has(id))
        throw new TinkerError(`request ${id} expired: its result is no longer kept`, undefined, 410);
      throw new TinkerError(`no request ${id} on this server (was it restarted?)`, undefined, 404);
    }
    if (!entry.settled) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([entry.done, new Promise<void>((r) => (timer = setTimeout(r, waitMs)))]);
      clearTimeout(timer);
    }
    return entry.settled;
  }

  /** Waits for every running future (on close). */
  async drain(): Promise<void> {
    await Promise.all([...this.entries.values()].map((e) => e.done));
  }

  private sweep(): void {
    const now = Date.now();
    for (const [id, e] of this.entries) {
      if (e.expires !== undefined && e.expires < now) {
        this.entries.delete(id);
        this.expired.add(id);
      }
    }
    // A Set iterates in insertion order: the first ids are the oldest.
    for (const id of this.expired) {
      if (this.expired.size <= REMEMBER_EXPIRED) break;
      this.expired.delete(id);
    }
  }
}
