/** Worker-thread entry: one Replica with its own TF.js wasm instance, driven by messages from the engine. */
import { parentPort, workerData } from "node:worker_threads";
import { Replica, type ReplicaOptions } from "./replica.js";
import type { SamplingParams, TokenEvent } from "../types.js";

interface Call {
  id: number;
  method: string;
  args: unknown[];
  /** sample only: post each sampled token as `{ kind: "token", id, index, token, logprob }` before the result. */
  stream?: boolean;
}

const port = parentPort!;
const { dir, opts } = workerData as { dir: string; opts: ReplicaOptions };

function serializeError(e: unknown) {
  const err = e instanceof Error ? e : new Error(String(e));
  return { name: err.name, message: err.message, hint: (err as { hint?: string }).hint, stack: err.stack };
}

Replica.load(dir, opts).then(
  (replica) => {
    // Calls run one at a time in arrival order, except sampling, which the scheduler interleaves.
    port.on("message", async (call: Call) => {
      try {
        const fn = (replica as unknown as Record<string, (...a: unknown[]) => Promise<unknown>>)[call.method];
        if (typeof fn !== "function") throw new Error(`unknown replica method ${call.method}`);
        let args = call.args;
        if (call.stream && call.method === "sample") {
          const onToken = (e: TokenEvent) => port.postMessage({ kind: "token", id: call.id, index: e.index, token: e.token, logprob: e.logprob });
          args = [args[0], { ...(args[1] as SamplingParams), onToken }, ...args.slice(2)];
        }
        const result = await fn.apply(replica, args);
        port.postMessage({ id: call.id, result });
      } catch (e) {
        port.postMessage({ id: call.id, error: serializeError(e) });
      }
    });
    port.postMessage({ ready: true });
  },
  (e) => port.postMessage({ ready: false, error: serializeError(e) }),
);
