/**
 * The engine's side of a replica in a worker thread: every ReplicaApi method becomes a message of
 * the typed map below (`ReplicaCall`), answered by ./replica-worker.ts.
 */
import { existsSync } from "node:fs";
import { fileURLToPath, pathToFileURL } from "node:url";
import { Worker } from "node:worker_threads";
import type { ReplicaApi, ReplicaOptions, Role } from "./replica-api.js";
import type { AdamParams, Datum, SamplingParams, TokenEvent, ValueDatum } from "../types.js";
import type { ResolvedLoss } from "../../rl/policy-loss.js";
import { AgentR1Error, InputError, ModelFormatError } from "../../util/errors.js";

/** The methods a worker answers (every ReplicaApi method but dispose, which ends the worker). */
export type ReplicaMethod = Exclude<keyof ReplicaApi, "dispose">;

/** One call as it crosses the thread boundary: the method and its arguments, typed together. */
export type ReplicaCall = {
  [K in ReplicaMethod]: { id: number; method: K; args: Parameters<ReplicaApi[K]>; stream?: boolean };
}[ReplicaMethod];

type Pending = { resolve: (v: unknown) => void; reject: (e: unknown) => void; onToken?: (e: TokenEvent) => void };
/** A sampled token of a streaming `sample` call, posted by the worker before the call's result. */
type TokenMessage = { kind: "token"; id: number; index: number; token: number; logprob: number };
type SerializedError = { name: string; message: string; hint?: string; stack?: string };

/** Rebuilds a worker's error with its class, so callers can still tell bad input from bugs. */
function reviveError(e: SerializedError): Error {
  const classes: Record<string, { prototype: object }> = { InputError, ModelFormatError, AgentR1Error };
  const proto = classes[e.name]?.prototype ?? Error.prototype;
  const err = Object.create(proto) as Error & { hint?: string };
  Object.assign(err, { name: e.name, message: e.message, hint: e.hint, stack: e.stack });
  return err;
}

function workerEntry(): string {
  const js = fileURLToPath(new URL("./replica-worker.js", import.meta.url));
  return existsSync(js) ? js : js.replace(/\.js$/, ".ts");
}

export class WorkerReplica implements ReplicaApi {
  private pending = new Map<number, Pending>();
  private nextId = 0;
  private dead?: Error;

  private constructor(private worker: Worker) {
    worker.on(
      "message",
      (msg: { id: number; kind?: undefined; result?: unknown; error?: SerializedError } | TokenMessage) => {
        const p = this.pending.get(msg.id);
        if (!p) return;
        if (msg.kind === "token") {
          try {
            p.onToken?.({ index: msg.index, token: msg.token, logprob: msg.logprob });
          } catch (e) {
            // As in-process: a throwing onToken fails its request; later tokens are ignored.
            p.onToken = undefined;
            const reject = p.reject;
            p.resolve = () => reject(e);
          }
          return;
        }
        this.pending.delete(msg.id);
        if (this.pending.size === 0) worker.unref();
        if (msg.error) p.reject(reviveError(msg.error));
        else p.resolve(msg.result);
      },
    );
    const fail = (e: Error) => {
      this.dead = e;
      for (const p of this.pending.values()) p.reject(e);
      this.pending.clear();
    };
    worker.on("error", fail);
    worker.on("exit", (code) => fail(new Error(`engine worker exited (code ${code})`)));
    worker.unref();
  }

  static async start(dir: string, opts: ReplicaOptions): Promise<WorkerReplica> {
    const entry = workerEntry();
    const worker = entry.endsWith(".ts")
      ? // Sources run under tsx (tests): register its loader in the worker before importing the entry.
        new Worker(
          `import(${JSON.stringify(import.meta.resolve("tsx/esm/api"))}).then((m) => { m.register(); return import(${JSON.stringify(pathToFileURL(entry).href)}); });`,
          { eval: true, workerData: { dir, opts } },
        )
      : new Worker(entry, { workerData: { dir, opts } });
    await new Promise<void>((resolve, reject) => {
      worker.once("message", (m: { ready: boolean; error?: SerializedError }) =>
        m.ready ? resolve() : reject(reviveError(m.error!)),
      );
      worker.once("error", reject);
    });
    return new WorkerReplica(worker);
  }

  sample(prompt: number[], params: SamplingParams, firstStream: number) {
    return this.call("sample", [prompt, params, firstStream]);
  }
  computeLogprobs(sequences: number[][], temperature: number) {
    return this.call("computeLogprobs", [sequences, temperature]);
  }
  forwardBackward(datums: Datum[], loss: ResolvedLoss, coef: number[][]) {
    return this.call("forwardBackward", [datums, loss, coef]);
  }
  createCritic() {
    return this.call("createCritic", []);
  }
  disposeCritic() {
    return this.call("disposeCritic", []);
  }
  criticValues(sequences: number[][]) {
    return this.call("criticValues", [sequences]);
  }
  criticForwardBackward(datums: ValueDatum[], clip: number, total: number) {
    return this.call("criticForwardBackward", [datums, clip, total]);
  }
  optimStep(role: Role, params: AdamParams) {
    return this.call("optimStep", [role, params]);
  }
  exportGradients(role: Role, target: Float32Array) {
    return this.call("exportGradients", [role, target]);
  }
  optimStepWithSum(role: Role, sources: Float32Array[], params: AdamParams) {
    return this.call("optimStepWithSum", [role, sources, params]);
  }
  gradientSize(role: Role) {
    return this.call("gradientSize", [role]);
  }
  save(role: Role, dir: string, tokenizerFrom: string) {
    return this.call("save", [role, dir, tokenizerFrom]);
  }
  load(role: Role, dir: string) {
    return this.call("load", [role, dir]);
  }
  zeroGrad(role: Role) {
    return this.call("zeroGrad", [role]);
  }
  weightsChecksum(role: Role) {
    return this.call("weightsChecksum", [role]);
  }
  clearPrefixCache() {
    return this.call("clearPrefixCache", []);
  }
  stats() {
    return this.call("stats", []);
  }
  dispose() {
    return this.terminate();
  }

  private call<K extends ReplicaMethod>(method: K, args: Parameters<ReplicaApi[K]>): ReturnType<ReplicaApi[K]> {
    return this.post(method, args as unknown[]) as ReturnType<ReplicaApi[K]>;
  }

  private post(method: ReplicaMethod, args: unknown[]): Promise<unknown> {
    if (this.dead) return Promise.reject(this.dead);
    // Functions and signals cannot cross the thread boundary: sample's onToken and signal stay here;
    // the worker posts tokens back, and an abort becomes a cancel message for the call.
    let onToken: ((e: TokenEvent) => void) | undefined;
    let signal: AbortSignal | undefined;
    if (method === "sample" && args[1] !== undefined) {
      const { onToken: fn, signal: sig, ...params } = args[1] as SamplingParams;
      if (fn !== undefined && typeof fn !== "function")
        return Promise.reject(new InputError(`sample: onToken must be a function, got ${typeof fn}`));
      if (sig?.aborted) return Promise.reject(sig.reason);
      onToken = fn;
      signal = sig;
      args = [args[0], params, ...args.slice(2)];
    }
    const id = this.nextId++;
    if (this.pending.size === 0) this.worker.ref();
    return new Promise((resolve, reject) => {
      const unlisten = signal ? this.cancelOnAbort(id, signal) : undefined;
      const settle =
        <T>(f: (v: T) => void) =>
        (v: T) => (unlisten?.(), f(v));
      this.pending.set(id, { resolve: settle(resolve), reject: settle(reject), onToken });
      this.worker.postMessage(onToken ? { id, method, args, stream: true } : { id, method, args });
    });
  }

  /** On abort: the call rejects here at once, and the worker drops its sequences. Returns the unsubscribe. */
  private cancelOnAbort(id: number, signal: AbortSignal): () => void {
    const onAbort = () => {
      const p = this.pending.get(id);
      if (!p) return;
      this.pending.delete(id);
      if (this.pending.size === 0) this.worker.unref();
      this.worker.postMessage({ kind: "cancel", id });
      p.reject(signal.reason);
    };
    signal.addEventListener("abort", onAbort, { once: true });
    return () => signal.removeEventListener("abort", onAbort);
  }

  async terminate(): Promise<void> {
    this.dead ??= new Error("engine disposed");
    await this.worker.terminate();
  }
}
