/**
 * Futures of the Tinker protocol: a compute request is acknowledged with a request id, and its
 * result is polled through `retrieve_future` (which the server long-polls). As the SDK does, each
 * poll says what it waits for (`X-Tinker-Request-Type`) and how many polls came before
 * (`X-Tinker-Request-Iteration`), and the answers are taken as:
 *  - `try_again` or 408: not ready; poll again (at once after a long poll; tinker-waits.ts);
 *  - 410: the result expired on the server: the request is sent again (`call`), as a new
 *    submission; if the server answers with the same request id, the result is lost and the call
 *    fails;
 *  - 402: the billing pause; 429 and 5xx, and a dropped connection: backoff (the connection at most
 *    `maxRetries` times in a row); 400 up to three times (a proxy's); other statuses fail;
 *  - `{error, category}`: the request failed on the server.
 * Every call has a deadline (`futureTimeoutMs`, 30 min by default) over its submissions and polls:
 * nothing waits without end. A sample whose session's completions are polled together
 * (`retrieve_futures`, tinker-session-poller.ts) waits for its completion there first (`ready`),
 * then fetches its result with one retrieve_future.
 */
import { TinkerError } from "./tinker-error.js";
import { Answer } from "./tinker-answer.js";
import { messageOf, type ProtoResult, type RawResponse, type TinkerHttp } from "./tinker-http.js";
import { backoffMs, pollPauseMs } from "./tinker-waits.js";

/** A value from the server in a message: on one line, at most 300 characters. */
const oneLine = (x: unknown) => String(x).replace(/\s+/g, " ").slice(0, 300);

export type FutureResult = { json: Record<string, unknown> } | { bytes: Uint8Array };

/** A poll answered 410: the server no longer holds the result. */
class FutureExpired extends Error {}

/** A call whose deadline came before its result (the caller may abandon the request: cancel_future). */
export class FutureDeadline extends TinkerError {}

/** The error for `named` (a request and its id) once the call's deadline has come. */
export function notDone(http: TinkerHttp, named: string): FutureDeadline {
  return new FutureDeadline(
    `${http.url}: ${named} is not done after ${http.o.futureTimeoutMs / 1000} s`,
    "the server is overloaded or stuck; look at its log",
  );
}

export interface PollOptions {
  /** X-Tinker-Request-Type: the SDK's name of the result ("Sample", "ForwardBackward", "OptimStep"). */
  type: string;
  /** A sample or forward_backward result, read as protobuf from SDK 0.25. */
  proto?: ProtoResult;
  signal?: AbortSignal;
  /** When the call must end, on the client's clock. Default: futureTimeoutMs from now. */
  deadline?: number;
}

/** Polls a future until it holds a result: JSON, or the protobuf bytes of a sample or forward_backward result. */
export async function pollFuture(
  http: TinkerHttp,
  requestId: string,
  what: string,
  o: PollOptions,
): Promise<FutureResult> {
  const { clock } = http;
  const deadline = o.deadline ?? clock.now() + http.o.futureTimeoutMs;
  const named = `${what} (request ${requestId})`;
  const accept = o.proto && http.proto ? "application/x-protobuf" : "application/json";
  let iteration = 0,
    badRequests = 0,
    backoffs = 0,
    lost = 0,
    empty = 0; // polls in a row that brought no result
  for (;;) {
    if (clock.now() > deadline) throw notDone(http, named);
    const polled = clock.now();
    const again = async () => {
      const wait = pollPauseMs(empty++, clock.random) - (clock.now() - polled);
      if (wait > 0) await clock.sleep(wait, "poll", o.signal);
    };
    const headers = {
      "Content-Type": "application/json",
      Accept: accept,
      "X-Tinker-Request-Type": o.type,
      "X-Tinker-Request-Iteration": String(iteration++),
    };
    let res: RawResponse;
    try {
      const body = JSON.stringify({ request_id: requestId, allow_metadata_only: false });
      res = await http.request("/api/v1/retrieve_future", body, headers, named, o.signal);
      lost = 0;
    } catch (e) {
      if (o.signal?.aborted) throw o.signal.reason;
      if (e instanceof TinkerError) throw e;
      await lostServer(http, named, e as Error, lost++, backoffs++, o.signal);
      continue;
    }
    if (res.status !== 402) http.billing.clear();
    if (res.status === 408 || (res.status === 400 && ++badRequests <= 3)) {
      await again();
      continue;
    }
    if (res.status === 410) throw new FutureExpired(messageOf(res.body));
    if (res.status === 402) {
      if (await http.billing.wait(`${http.url}: ${named}`, messageOf(res.body), o.signal)) continue;
      throw http.billingFailure(named, `HTTP 402: ${messageOf(res.body)}`);
    }
    if (res.status === 429 || res.status >= 500) {
      await clock.sleep(backoffMs(backoffs++, clock.random), "backoff", o.signal);
      continue;
    }
    if (res.status >= 300) throw http.failure(named, res.status, messageOf(res.body));
    const result = settled(http, res, named, o);
    if (result) return result;
    await again();
  }
}

/** A poll's 2xx answer: the result, or undefined for `try_again`; a failure or the wrong generation throws. */
function settled(http: TinkerHttp, res: RawResponse, named: string, o: PollOptions): FutureResult | undefined {
  if (res.contentType.includes("application/x-protobuf")) return { bytes: res.body };
  const json = http.parseJson(res, named);
  if (json.type === "try_again") return undefined;
  if ("error" in json)
    throw new TinkerError(
      `${http.url}: ${named} failed on the server: ${oneLine(json.error)}${json.category ? ` (${oneLine(json.category)} error)` : ""}`,
    );
  if (o.proto && http.proto)
    throw new TinkerError(
      `${http.url}: ${named} came back as JSON, but SDK ${http.o.sdkVersion} reads it only as protobuf`,
      "the server speaks the JSON generation: set engine.tinker.sdkVersion to 0.24.1",
    );
  return { json };
}

/** A poll that got no answer: wait a backoff, or fail after maxRetries in a row. */
async function lostServer(http: TinkerHttp, named: string, e: Error, lost: number, n: number, signal?: AbortSignal) {
  if (lost >= http.o.maxRetries)
    throw new TinkerError(
      `${http.url}: lost the server while waiting for ${named} (${e.message})`,
      "is the server still running? once it is back, continue the run with --resume",
    );
  const wait = backoffMs(n, http.clock.random);
  http.o.log?.(`tinker: ${http.url} does not answer (${e.message}); retrying in ${(wait / 1000).toFixed(1)} s`);
  await http.clock.sleep(wait, "backoff", signal);
}

export interface CallSpec extends Omit<PollOptions, "deadline"> {
  /** Names the request in errors and logs ("asample", "forward_backward (seq_id 3, 2 datums)"). */
  what: string;
  /** Sends the request (again, once its result expired) within the call's deadline; returns the acknowledgement. */
  submit(deadline: number): Promise<Record<string, unknown>>;
  /** Waits until the request `id` is known to be done (a session's completion poller), before its result is fetched. */
  ready?(id: string, named: string, deadline: number): Promise<void>;
}

/** A result, and the answer it came in (which names the server and the request in faults). */
export interface CallResult {
  result: FutureResult;
  answer: Answer;
}

/** Submits a request and waits for its result; a result that expired (410) is asked for again by resubmitting. */
export async function call(http: TinkerHttp, spec: CallSpec): Promise<CallResult> {
  const deadline = http.clock.now() + http.o.futureTimeoutMs;
  let expired: string | undefined;
  for (;;) {
    const ack = await spec.submit(deadline);
    const id = new Answer(http.url, spec.what).string(ack, "request_id");
    const named = `${spec.what} (request ${id})`;
    if (id === expired)
      throw new TinkerError(
        `${http.url}: ${named}: the result expired on the server (HTTP 410), and sending the request again gave the same request id: the result is lost`,
        "the server keeps results only for a while after they are done; is it overloaded? look at its log",
      );
    try {
      await spec.ready?.(id, named, deadline);
      const result = await pollFuture(http, id, spec.what, { ...spec, deadline });
      return { result, answer: new Answer(http.url, named) };
    } catch (e) {
      if (!(e instanceof FutureExpired)) throw e;
      http.o.log?.(`tinker: ${http.url}: ${named}: the result expired (HTTP 410: ${e.message}); sending it again`);
      expired = id;
    }
  }
}
