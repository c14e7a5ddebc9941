/** Worker-thread entry: one Replica (its own TF.js wasm instance, for the TF.js backend), driven by messages from the engine. */
import { parentPort, workerData } from "node:worker_threads";
import { Replica } from "./replica.js";
import type { ReplicaOptions } from "./replica-api.js";
import type { ReplicaCall, ReplicaMethod } from "./worker-replica.js";
import type { SamplingParams, TokenEvent } from "../types.js";

/** A call (worker-replica.ts's ReplicaCall); `stream` (sample only): post each sampled token as `{ kind: "token", id, index, token, logprob }` before the result. */
type Call = ReplicaCall;

/** What the engine may call: the replica's methods, and nothing else reachable from it. */
const METHODS = new Set<string>([
  "sample",
  "computeLogprobs",
  "forwardBackward",
  "createCritic",
  "disposeCritic",
  "criticValues",
  "criticForwardBackward",
  "optimStep",
  "exportGradients",
  "optimStepWithSum",
  "gradientSize",
  "save",
  "load",
  "zeroGrad",
  "weightsChecksum",
  "clearPrefixCache",
  "stats",
] satisfies ReplicaMethod[]);
/** The caller aborted sample call `id`: its sequences leave the batch (its result is no longer awaited). */
type Cancel = { kind: "cancel"; id: number };

const port = parentPort!;
const { dir, opts } = workerData as { dir: string; opts: ReplicaOptions };

function serializeError(e: unknown) {
  const err = e instanceof Error ? e : new Error(String(e));
  return { name: err.name, message: err.message, hint: (err as { hint?: string }).hint, stack: err.stack };
}

Replica.load(dir, opts).then(
  (replica) => {
    // Sample calls in flight, by id, so a cancel message can abort them.
    const sampling = new Map<number, AbortController>();
    // Calls run one at a time in arrival order, except sampling, which the scheduler interleaves.
    port.on("message", async (call: Call | Cancel) => {
      if ("kind" in call) return sampling.get(call.id)?.abort();
      try {
        if (!METHODS.has(call.method)) throw new Error(`unknown replica method ${call.method}`);
        const fn = replica[call.method] as (...a: unknown[]) => Promise<unknown>;
        let args: unknown[] = call.args;
        if (call.method === "sample") {
          const controller = new AbortController();
          sampling.set(call.id, controller);
          const onToken = call.stream
            ? (e: TokenEvent) =>
                port.postMessage({ kind: "token", id: call.id, index: e.index, token: e.token, logprob: e.logprob })
            : undefined;
          args = [args[0], { ...(args[1] as SamplingParams), onToken, signal: controller.signal }, ...args.slice(2)];
        }
        const result = await fn.apply(replica, args);
        port.postMessage({ id: call.id, result });
      } catch (e) {
        port.postMessage({ id: call.id, error: serializeError(e) });
      } finally {
        sampling.delete(call.id);
      }
    });
    port.postMessage({ ready: true });
  },
  (e) => port.postMessage({ ready: false, error: serializeError(e) }),
);
