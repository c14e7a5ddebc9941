/**
 * One call to a judge: POST a chat-completions request to an OpenAI-compatible server and return
 * the first choice's message text with the `usage` the server reported. Nothing the server answers
 * is trusted: the call has a time limit, a redirect is never followed (the API key would go along),
 * the answer is read within 1 MiB, and every failure (unreachable, timeout, HTTP error, not JSON, no
 * message) is returned as a reason, never thrown, so the caller can retry and count it.
 */
import type { ChatMessage } from "../model/chat-template.js";
import { readLimitedText, readPrefix, redirectTarget } from "../util/read-limited.js";

/** The largest judge answer read, in bytes. */
const MAX_ANSWER_BYTES = 1 << 20;

export interface JudgeEndpoint {
  /** The base URL (…/v1) or the full …/chat/completions URL. */
  url: string;
  model: string;
  apiKey?: string;
  maxTokens: number;
  temperature: number;
  timeoutMs: number;
}

export interface JudgeUsage {
  promptTokens: number;
  completionTokens: number;
}

export type JudgeCallResult = { content: unknown; usage: JudgeUsage } | { failed: string };

/** Where the requests go: URL/chat/completions, unless URL already names that route. */
export function chatCompletionsUrl(url: string): string {
  const base = url.replace(/\/+$/, "");
  return /\/chat\/completions$/.test(base) ? base : `${base}/chat/completions`;
}

/** The numbers of a `usage` object; missing or odd fields count 0. */
function usageOf(raw: unknown): JudgeUsage {
  const u = (raw ?? {}) as { prompt_tokens?: unknown; completion_tokens?: unknown };
  const n = (x: unknown) => (typeof x === "number" && Number.isFinite(x) && x >= 0 ? x : 0);
  return { promptTokens: n(u.prompt_tokens), completionTokens: n(u.completion_tokens) };
}

/** An HTTP error answer's status with the start of its body. */
async function httpFailure(res: Response): Promise<string> {
  const text = new TextDecoder().decode(await readPrefix(res, 4096).catch(() => new Uint8Array(0)));
  return `HTTP ${res.status}${text ? `: ${text.replace(/\s+/g, " ").slice(0, 200)}` : ""}`;
}

/** The body of a 2xx answer: its message text and usage, or why there is none. */
function readAnswer(text: string): JudgeCallResult {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return { failed: `the server's answer is not JSON: ${JSON.stringify(text.slice(0, 120))}` };
  }
  const choice = (body as { choices?: { message?: { content?: unknown } }[] } | null)?.choices?.[0];
  if (!choice?.message) return { failed: "the server's answer has no choices[0].message" };
  return { content: choice.message.content, usage: usageOf((body as { usage?: unknown }).usage) };
}

/** One request to the judge (see the header); resolves to the answer or a failure, never rejects. */
export async function callJudge(e: JudgeEndpoint, messages: ChatMessage[]): Promise<JudgeCallResult> {
  const timeout = AbortSignal.timeout(e.timeoutMs);
  try {
    const res = await fetch(chatCompletionsUrl(e.url), {
      method: "POST",
      headers: { "Content-Type": "application/json", ...(e.apiKey ? { Authorization: `Bearer ${e.apiKey}` } : {}) },
      body: JSON.stringify({
        model: e.model,
        messages,
        max_tokens: e.maxTokens,
        temperature: e.temperature,
        stream: false,
      }),
      redirect: "manual",
      signal: timeout,
    });
    if (res.status >= 300 && res.status < 400) {
      await res.body?.cancel().catch(() => undefined);
      return { failed: `HTTP ${res.status}: a redirect to ${redirectTarget(res)}, not followed` };
    }
    if (!res.ok) return { failed: await httpFailure(res) };
    const text = await readLimitedText(
      res,
      MAX_ANSWER_BYTES,
      () => new Error(`the answer ran past ${MAX_ANSWER_BYTES} bytes and was cut off`),
    );
    return readAnswer(text);
  } catch (err) {
    if (timeout.aborted) return { failed: `no answer within ${e.timeoutMs} ms` };
    const cause = (err as { cause?: { message?: string } }).cause?.message;
    return { failed: cause ?? (err instanceof Error ? err.message : String(err)) };
  }
}
