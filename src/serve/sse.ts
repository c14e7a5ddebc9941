/** Server-sent events as the OpenAI streaming API sends them: `data: {json}\n\n` lines, ending with `data: [DONE]`. */
import type { ServerResponse } from "node:http";

export class SseWriter {
  constructor(private readonly res: ServerResponse) {
    res.writeHead(200, { "Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-cache", Connection: "keep-alive" });
  }

  /** False once the client has gone away (later events are dropped). */
  get open(): boolean {
    return !this.res.destroyed && !this.res.writableEnded;
  }

  send(event: unknown): void {
    if (this.open) this.res.write(`data: ${JSON.stringify(event)}\n\n`);
  }

  done(): void {
    if (!this.open) return;
    this.res.write("data: [DONE]\n\n");
    this.res.end();
  }
}
