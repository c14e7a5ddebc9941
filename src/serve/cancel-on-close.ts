/**
 * Work that stops when its response closes: a client that leaves, or a stream cut at
 * maxResponseBytes, aborts the work (through the signal it is handed), and the caller writes
 * nothing more (undefined).
 */
import type { ServerResponse } from "node:http";
import type { Engine, SampleResult, SamplingParams } from "../engine/types.js";

/** `run(signal)`, or undefined when the response closed before it finished (its rejection then dropped). */
export async function untilClosed<T>(
  res: ServerResponse,
  run: (signal: AbortSignal) => Promise<T>,
): Promise<T | undefined> {
  const gone = new AbortController();
  let done = false;
  res.on("close", () => done || gone.abort());
  const result = await run(gone.signal).catch((e: unknown) => (gone.signal.aborted ? undefined : Promise.reject(e)));
  done = true;
  return result !== undefined && !res.writableEnded ? result : undefined;
}

/** engine.sample, cancelled when the response closes. */
export const sampleUntilClosed = (
  engine: Pick<Engine, "sample">,
  prompt: number[],
  params: SamplingParams,
  res: ServerResponse,
): Promise<SampleResult | undefined> => untilClosed(res, (signal) => engine.sample(prompt, { ...params, signal }));
