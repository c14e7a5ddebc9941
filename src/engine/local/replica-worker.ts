/** Worker-thread entry: one Replica with its own TF.js wasm instance, driven by messages from the engine. */
import { parentPort, workerData } from "node:worker_threads";
import { Replica, type ReplicaOptions } from "./replica.js";

interface Call {
  id: number;
  method: string;
  args: unknown[];
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
        const result = await fn.apply(replica, call.args);
        port.postMessage({ id: call.id, result });
      } catch (e) {
        port.postMessage({ id: call.id, error: serializeError(e) });
      }
    });
    port.postMessage({ ready: true });
  },
  (e) => port.postMessage({ ready: false, error: serializeError(e) }),
);
