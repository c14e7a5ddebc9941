/** Server-sent events as the OpenAI streaming API sends them: `data: {json}\n\n` lines, ending with `data: [DONE]`. */
import type { ServerResponse } from "node:http";
import { responseTooLarge, type RequestLimits } from "./request-limits.js";

export class SseWriter {
  private sent = 0;

  /**
   * With `limits`, maxResponseBytes bounds the whole stream: the event that would pass it is
   * replaced by a last `data: {"error": ...}` event (which OpenAI clients raise), and the
   * stream ends there.
   */
  constructor(
    private readonly res: ServerResponse,
    private readonly limits?: RequestLimits,
  ) {
    res.writeHead(200, {
      "Content-Type": "text/event-stream; charset=utf-8",
      "Cache-Control": "no-cache",
      Connection: "keep-alive",
    });
  }

  /** False once the client has gone away, or the stream was cut at its size limit (later events are dropped). */
  get open(): boolean {
    return !this.res.destroyed && !this.res.writableEnded;
  }

  send(event: unknown): void {
    if (!this.open) return;
    const line = `data: ${JSON.stringify(event)}\n\n`;
    this.sent += Buffer.byteLength(line);
    if (!this.limits || this.sent <= this.limits.maxResponseBytes) this.res.write(line);
    else this.res.end(`data: ${JSON.stringify(responseTooLarge(this.limits).body())}\n\n`);
  }

  done(): void {
    if (!this.open) return;
    this.res.write("data: [DONE]\n\n");
    this.res.end();
  }
}
