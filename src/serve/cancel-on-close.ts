/**
 * Sampling that stops when its response closes: a client that leaves, or a stream cut at
 * maxResponseBytes, aborts the engine's work, and the caller writes nothing more (undefined).
 */
import type { ServerResponse } from "node:http";
import type { Engine, SampleResult, SamplingParams } from "../engine/types.js";

export async function sampleUntilClosed(
  engine: Pick<Engine, "sample">,
  prompt: number[],
  params: SamplingParams,
  res: ServerResponse,
): Promise<SampleResult | undefined> {
  const gone = new AbortController();
  let sampled = false;
  res.on("close", () => sampled || gone.abort());
  const result = await engine
    .sample(prompt, { ...params, signal: gone.signal })
    .catch((e: unknown) => (gone.signal.aborted ? undefined : Promise.reject(e)));
  sampled = true;
  return result && !res.writableEnded ? result : undefined;
}
