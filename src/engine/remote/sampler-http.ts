/**
 * One POST to an inference server from a rollout sampler (./sampler-client.ts), under the rules
 * every such call keeps: a timeout, redirects refused rather than followed (the API key would go
 * along), the answer read within `maxResponseBytes`, and each failure one TinkerError naming the
 * server and the request, with the server's own reason when it gave one (an OpenAI or vLLM error
 * object, SGLang's `error_message`, FastAPI's `detail`).
 */
import { formatBytes, readLimitedText, readPrefix, redirectTarget } from "../../util/read-limited.js";
import { TinkerError } from "./tinker-error.js";
import type { SamplerOptions } from "./sampler-client.js";

/** The default limit on an answer's (decoded) size. */
export const DEFAULT_SAMPLER_RESPONSE_BYTES = 256 * 1024 * 1024;

/** The server's reason in an error answer, on one line. */
function reasonOf(text: string): string {
  let detail: unknown = text;
  try {
    const j = JSON.parse(text) as {
      error?: { message?: string } | string;
      detail?: string;
      message?: string;
      error_message?: string;
    };
    detail =
      (typeof j.error === "object" ? j.error?.message : j.error) ?? j.error_message ?? j.detail ?? j.message ?? text;
  } catch {
    // not JSON
  }
  return String(detail).replace(/\s+/g, " ").trim().slice(0, 300);
}

/**
 * POSTs `body` as JSON and returns the answer parsed as JSON; with `text`, an answer that is not
 * JSON comes back as its text (vLLM answers its LoRA routes with a line of text).
 */
export async function postJson(
  url: string,
  body: unknown,
  o: SamplerOptions,
  what: string,
  signal?: AbortSignal,
  text = false,
): Promise<unknown> {
  const timeout = AbortSignal.timeout(o.timeoutMs ?? 600_000);
  const lost = (e: unknown): Error => {
    if (signal?.aborted) return signal.reason as Error;
    if (e instanceof TinkerError) return e;
    const cause = timeout.aborted
      ? `no answer within ${(o.timeoutMs ?? 600_000) / 1000} s`
      : ((e as { cause?: { message?: string } }).cause?.message ?? (e as Error).message);
    return new TinkerError(
      `${o.url}: ${what} failed: ${cause}`,
      `is the ${o.kind} server running? check ${o.urlField ?? "engine.sampler.url"}`,
    );
  };
  let res: Response;
  try {
    res = await fetch(url, {
      method: "POST",
      headers: { "Content-Type": "application/json", ...(o.apiKey ? { Authorization: `Bearer ${o.apiKey}` } : {}) },
      body: JSON.stringify(body),
      redirect: "manual",
      signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
    });
  } catch (e) {
    throw lost(e);
  }
  if (res.status >= 300 && res.status < 400) {
    await res.body?.cancel().catch(() => undefined);
    throw new TinkerError(
      `${o.url}: ${what}: the server answered a redirect (HTTP ${res.status}) to ${redirectTarget(res)}; not followed (the API key would go along)`,
      `point ${o.urlField ?? "engine.sampler.url"} at the final address`,
    );
  }
  if (!res.ok) {
    const answer = new TextDecoder().decode(await readPrefix(res, 64 * 1024).catch((e) => Promise.reject(lost(e))));
    throw new TinkerError(`${o.url}: ${what} failed: HTTP ${res.status}: ${reasonOf(answer)}`);
  }
  const limit = o.maxResponseBytes ?? DEFAULT_SAMPLER_RESPONSE_BYTES;
  const answer = await readLimitedText(res, limit, (over) => {
    const limitText = `the ${formatBytes(limit)} limit on answers (maxResponseBytes)`;
    return new TinkerError(
      `${o.url}: ${what}: ${over.declared ? `the answer declares ${formatBytes(over.bytes)}, over ${limitText}` : `the answer ran past ${limitText} and was cut off`}`,
      `an answer holds n × max_tokens token ids and logprobs; is ${o.urlField ?? "engine.sampler.url"} a ${o.kind} server?`,
    );
  }).catch((e) => Promise.reject(lost(e)));
  try {
    return JSON.parse(answer);
  } catch {
    if (text) return answer;
    throw new TinkerError(`${o.url}: ${what} answered something that is not JSON`);
  }
}
