/**
 * Sample completions of one sampling session, polled together (SDK 0.31, when the server's client
 * config says `sample_use_retrieve_futures`): one loop long-polls `POST /api/v1/retrieve_futures`
 * with the session and the cursor of the last answer, and wakes the samples whose request ids come
 * back (finished or failed); each then fetches its result with one retrieve_future. So a session
 * with many samples in flight holds one poll, not one per sample.
 *
 * The loop runs only while a sample waits (a waiter that gives up ends the poll in flight; the
 * cursor is kept, and the server sends again what it has not seen acknowledged). A completion that
 * comes before its sample waits is kept for it (at most 10,000). The answer is checked as every
 * answer is (a TinkerAnswerError naming the field); a dropped connection or a 5xx backs off, up to
 * `maxRetries` in a row; a refusal fails every waiting sample. A waiter whose call's deadline has
 * come fails with the deadline's error.
 */
import { Answer, isNot } from "./tinker-answer.js";
import { TinkerError } from "./tinker-error.js";
import { messageOf, type TinkerHttp } from "./tinker-http.js";
import { notDone } from "./tinker-future.js";
import { backoffMs, pollPauseMs } from "./tinker-waits.js";

/** One completion the server reports. */
export interface Completion {
  state: "finished" | "failed";
  requestId: string;
}

interface Waiter {
  named: string;
  deadline: number;
  resolve(): void;
  reject(e: unknown): void;
}

/** Completions kept for samples that do not wait yet. */
const KEEP = 10_000;

/** A retrieve_futures answer, checked: its completions and cursor. */
export function readCompletions(
  raw: Record<string, unknown>,
  a: Answer,
): { completions: Completion[]; cursor: number } {
  const list = raw.completions;
  if (!Array.isArray(list)) throw a.fault("completions", isNot(list, "a list"));
  const completions = list.map((x, i) => {
    const c = a.object(x, `completions[${i}]`);
    if (c.state !== "finished" && c.state !== "failed")
      throw a.fault(`completions[${i}].state`, isNot(c.state, '"finished" or "failed"'));
    const requestId = c.request_id;
    if (typeof requestId !== "string" || requestId === "")
      throw a.fault(`completions[${i}].request_id`, isNot(requestId, "a non-empty string"));
    a.optionalInteger(
      c,
      "response_payload_uncompressed_size",
      0,
      `completions[${i}].response_payload_uncompressed_size`,
    );
    return { state: c.state, requestId } as Completion;
  });
  const cursor = raw.cursor;
  if (!Number.isSafeInteger(cursor) || (cursor as number) < 0) throw a.fault("cursor", isNot(cursor, "a count"));
  return { completions, cursor: cursor as number };
}

export class SessionPoller {
  private cursor = 0;
  private readonly done = new Set<string>();
  private readonly waiters = new Map<string, Waiter[]>();
  private running?: Promise<void>;
  private inFlight?: AbortController;

  constructor(
    private readonly http: TinkerHttp,
    readonly samplingSessionId: string,
  ) {}

  /** Resolves once request `id` is done; `named` names it in errors. */
  waitFor(id: string, named: string, deadline: number, signal?: AbortSignal): Promise<void> {
    if (this.done.delete(id)) return Promise.resolve();
    if (signal?.aborted) return Promise.reject(signal.reason);
    return new Promise<void>((resolve, reject) => {
      const onAbort = () => {
        this.drop(id, w);
        reject(signal!.reason);
      };
      const w: Waiter = {
        named,
        deadline,
        resolve: () => (signal?.removeEventListener("abort", onAbort), resolve()),
        reject: (e) => (signal?.removeEventListener("abort", onAbort), reject(e)),
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      this.waiters.set(id, [...(this.waiters.get(id) ?? []), w]);
      this.ensureLoop();
    });
  }

  /** Starts the loop unless it runs; one that ends while a sample has just come to wait starts again. */
  private ensureLoop(): void {
    if (this.running) return;
    this.running = this.loop().finally(() => {
      this.running = undefined;
      if (this.waiters.size > 0) this.ensureLoop();
    });
  }

  private drop(id: string, w: Waiter): void {
    const left = (this.waiters.get(id) ?? []).filter((x) => x !== w);
    if (left.length > 0) this.waiters.set(id, left);
    else this.waiters.delete(id);
    if (this.waiters.size === 0) this.inFlight?.abort(); // no one waits: end the poll in flight
  }

  /** Polls while anyone waits. */
  private async loop(): Promise<void> {
    const { clock } = this.http;
    let empty = 0,
      lost = 0;
    while (this.expire() > 0) {
      const polled = clock.now();
      let got: Completion[];
      try {
        got = await this.poll();
        lost = 0;
      } catch (e) {
        if (this.waiters.size === 0) return; // the poll was ended: no one waits
        if (e instanceof TinkerError || lost >= this.http.o.maxRetries) return this.failAll(this.lostError(e));
        await clock.sleep(backoffMs(lost++, clock.random), "backoff");
        continue;
      }
      for (const c of got) this.deliver(c.requestId);
      if (got.length > 0) empty = 0;
      else {
        const wait = pollPauseMs(empty++, clock.random) - (clock.now() - polled);
        if (wait > 0) await clock.sleep(wait, "poll");
      }
    }
  }

  /** Fails the waiters whose deadline has come; returns how many still wait. */
  private expire(): number {
    const now = this.http.clock.now();
    for (const [id, ws] of this.waiters)
      for (const w of ws.filter((x) => now > x.deadline)) {
        this.drop(id, w);
        w.reject(notDone(this.http, w.named));
      }
    return this.waiters.size;
  }

  private deliver(id: string): void {
    const ws = this.waiters.get(id);
    if (!ws) {
      this.done.add(id);
      if (this.done.size > KEEP) this.done.delete(this.done.values().next().value!);
      return;
    }
    this.waiters.delete(id);
    ws.forEach((w) => w.resolve());
  }

  private failAll(e: Error): void {
    const all = [...this.waiters.values()].flat();
    this.waiters.clear();
    all.forEach((w) => w.reject(e));
  }

  private lostError(e: unknown): Error {
    if (e instanceof TinkerError) return e;
    return new TinkerError(
      `${this.http.url}: lost the server while polling the completions of sampling session ${this.samplingSessionId} (retrieve_futures: ${(e as Error).message})`,
      "is the server still running? once it is back, continue the run with --resume",
    );
  }

  /** One retrieve_futures poll: the completions it brings (the cursor moves on). */
  private async poll(): Promise<Completion[]> {
    const what = `retrieve_futures (sampling session ${this.samplingSessionId})`;
    const body = JSON.stringify({
      target: { type: "sampling_session", sampling_session_id: this.samplingSessionId, cloned_sampler_id: 0 },
      prev_cursor: this.cursor,
    });
    const headers = { "Content-Type": "application/json", Accept: "application/json" };
    this.inFlight = new AbortController();
    const res = await this.http.request("/api/v1/retrieve_futures", body, headers, what, this.inFlight.signal);
    if (res.status !== 402) this.http.billing.clear();
    if (res.status === 408) return [];
    if (res.status === 402) {
      if (await this.http.billing.wait(`${this.http.url}: ${what}`, messageOf(res.body))) return [];
      throw this.http.billingFailure(what, `HTTP 402: ${messageOf(res.body)}`);
    }
    if (res.status === 429 || res.status >= 500) throw new Error(`HTTP ${res.status}: ${messageOf(res.body)}`);
    if (res.status >= 300) throw this.http.failure(what, res.status, messageOf(res.body));
    const { completions, cursor } = readCompletions(this.http.parseJson(res, what), new Answer(this.http.url, what));
    this.cursor = cursor;
    return completions;
  }
}
