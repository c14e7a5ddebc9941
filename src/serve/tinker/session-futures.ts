/**
 * `retrieve_futures` for `serve --tinker` (SDK 0.31): a log of the sample requests that settled,
 * per sampling session and cloned sampler (`seq_id` div 10⁹, 0 for a client's own samples), each
 * entry numbered. A poll names the last number it has seen (`prev_cursor`): the entries up to it
 * are dropped, the ones after it answered at once, and with none the poll waits (long-polls) for
 * the next, up to its `timeout` or the server's poll limit, then answers none. The cursor is the
 * number of the last entry answered, so a client whose poll was cut asks again from where it was.
 * A log holds at most 100,000 entries unpolled (the oldest go first); a sampling session's logs go
 * with it.
 */
import { TinkerError } from "../../engine/remote/tinker-error.js";
import { bad, int, obj, str } from "./wire-input.js";

/** One settled request, as the SDK reads it (FutureFinished / FutureFailed). */
export interface Completion {
  state: "finished" | "failed";
  request_id: string;
}

interface Entry extends Completion {
  n: number;
}

interface Log {
  next: number;
  entries: Entry[];
  wake: (() => void)[];
}

/** Entries a log keeps unpolled. */
const KEEP = 100_000;

/** A retrieve_futures body, read strictly (400 naming the field). */
export interface PollRequest {
  samplingSessionId: string;
  cloned: number;
  prevCursor: number;
  /** The client's wait, ms (undefined: the server's). */
  waitMs?: number;
}

export function readPollRequest(body: Record<string, unknown>): PollRequest {
  const target = obj(body.target, "target");
  if (target.type !== undefined && target.type !== "sampling_session")
    throw bad("target.type", '"sampling_session"', target.type);
  const cloned = target.cloned_sampler_id ?? 0;
  const timeout = body.timeout;
  if (
    timeout !== undefined &&
    timeout !== null &&
    (typeof timeout !== "number" || !(timeout >= 0) || !Number.isFinite(timeout))
  )
    throw bad("timeout", "a number of seconds >= 0", timeout);
  return {
    samplingSessionId: str(target.sampling_session_id, "target.sampling_session_id"),
    cloned: int(cloned, "target.cloned_sampler_id"),
    prevCursor: int(body.prev_cursor ?? 0, "prev_cursor"),
    ...(typeof timeout === "number" ? { waitMs: timeout * 1000 } : {}),
  };
}

/** Waits for the next entry of `log`, or `ms`. */
function waitOn(log: Log, ms: number): Promise<void> {
  return new Promise<void>((resolve) => {
    const wake = () => {
      clearTimeout(timer);
      resolve();
    };
    const timer = setTimeout(() => {
      log.wake = log.wake.filter((w) => w !== wake);
      resolve();
    }, ms);
    log.wake.push(wake);
  });
}

export class SessionCompletions {
  private readonly logs = new Map<string, Log>();

  private log(session: string, cloned: number): Log {
    const key = `${session}#${cloned}`;
    let log = this.logs.get(key);
    if (!log) this.logs.set(key, (log = { next: 1, entries: [], wake: [] }));
    return log;
  }

  /** A sample of `session` (cloned sampler `cloned`) settled. */
  record(session: string, cloned: number, requestId: string, ok: boolean): void {
    const log = this.log(session, cloned);
    log.entries.push({ n: log.next++, state: ok ? "finished" : "failed", request_id: requestId });
    if (log.entries.length > KEEP) log.entries.splice(0, log.entries.length - KEEP);
    log.wake.splice(0).forEach((w) => w());
  }

  /** The answer to a poll, waiting up to `waitMs` for an entry past `prevCursor`. */
  async poll(r: PollRequest, waitMs: number): Promise<{ completions: Completion[]; cursor: number }> {
    const log = this.log(r.samplingSessionId, r.cloned);
    if (r.prevCursor >= log.next)
      throw new TinkerError(
        `prev_cursor ${r.prevCursor} is past this sampling session's last completion (${log.next - 1}); was the server restarted?`,
      );
    const i = log.entries.findIndex((e) => e.n > r.prevCursor);
    log.entries.splice(0, i === -1 ? log.entries.length : i); // seen: dropped
    if (log.entries.length === 0 && waitMs > 0) await waitOn(log, waitMs);
    const last = log.entries[log.entries.length - 1];
    return {
      completions: log.entries.map(({ state, request_id }) => ({ state, request_id })),
      cursor: last ? last.n : r.prevCursor,
    };
  }

  /** Forgets a sampling session's logs (it closed), waking its polls. */
  drop(session: string): void {
    for (const [key, log] of this.logs)
      if (key.startsWith(`${session}#`)) {
        this.logs.delete(key);
        log.wake.splice(0).forEach((w) => w());
      }
  }
}
