/**
 * A streamed POST /responses answer: server-sent events `event: TYPE\ndata: {json}\n\n`, each with
 * a `sequence_number`, in the order the OpenAI clients (the `openai` client's stream helpers, the
 * Agents SDK, the AI SDK) rebuild the response from:
 *   response.created, response.in_progress (the response with no output yet);
 *   for the message: response.output_item.added, response.content_part.added, then
 *     response.output_text.delta as text is sampled, response.output_text.done,
 *     response.content_part.done, response.output_item.done;
 *   per function call: response.output_item.added (empty arguments),
 *     response.function_call_arguments.delta, response.function_call_arguments.done,
 *     response.output_item.done;
 *   response.completed (or response.incomplete), carrying the whole response.
 * With `limits`, maxResponseBytes bounds the stream: the event that would pass it is replaced by
 * a last `error` event (which the clients raise), and the stream ends there.
 */
import type { ServerResponse } from "node:http";
import { responseTooLarge, type RequestLimits } from "./request-limits.js";
import type { ResponseBody } from "./responses-answer.js";
import type { MessageOutputItem, OutputItem } from "./responses-items.js";

export class ResponseEvents {
  private sequence = 0;
  private bytes = 0;
  private begun = false;
  /** The message item's text sent so far; undefined until the item is announced. */
  private streamed?: string;

  /** `started` is the in-progress response (responseBody without an answer). */
  constructor(
    private readonly res: ServerResponse,
    private readonly started: ResponseBody,
    private readonly messageId: string,
    private readonly limits?: RequestLimits,
  ) {}

  /** False once the client has gone away, or the stream was cut at its size limit. */
  get open(): boolean {
    return !this.res.destroyed && !this.res.writableEnded;
  }

  /** A piece of the message text, as sampled. */
  text(piece: string): void {
    if (piece === "") return;
    this.begin();
    this.openMessage();
    this.delta(piece);
  }

  /** Everything after the text streamed so far, then the terminal event with `done`. */
  finish(done: ResponseBody): void {
    this.begin();
    done.output.forEach((item, index) =>
      item.type === "message" ? this.closeMessage(item, index) : this.functionCall(item, index),
    );
    const type = done.status === "incomplete" ? "response.incomplete" : "response.completed";
    this.send(type, { response: done });
    if (this.open) this.res.end();
  }

  private begin(): void {
    if (this.begun) return;
    this.begun = true;
    this.res.writeHead(200, {
      "Content-Type": "text/event-stream; charset=utf-8",
      "Cache-Control": "no-cache",
      Connection: "keep-alive",
    });
    this.send("response.created", { response: this.started });
    this.send("response.in_progress", { response: this.started });
  }

  private openMessage(): void {
    if (this.streamed !== undefined) return;
    this.streamed = "";
    const item = { type: "message", id: this.messageId, status: "in_progress", role: "assistant", content: [] };
    this.send("response.output_item.added", { output_index: 0, item });
    this.send("response.content_part.added", {
      item_id: this.messageId,
      output_index: 0,
      content_index: 0,
      part: { type: "output_text", text: "", annotations: [], logprobs: [] },
    });
  }

  private delta(piece: string): void {
    this.streamed += piece;
    this.send("response.output_text.delta", {
      item_id: this.messageId,
      output_index: 0,
      content_index: 0,
      delta: piece,
      logprobs: [],
    });
  }

  private closeMessage(item: MessageOutputItem, index: number): void {
    this.openMessage();
    const part = item.content[0];
    const sent = this.streamed ?? "";
    if (part.text.startsWith(sent) && part.text.length > sent.length) this.delta(part.text.slice(sent.length));
    const at = { item_id: item.id, output_index: index, content_index: 0 };
    this.send("response.output_text.done", { ...at, text: part.text, logprobs: [] });
    this.send("response.content_part.done", { ...at, part });
    this.send("response.output_item.done", { output_index: index, item });
  }

  private functionCall(item: Exclude<OutputItem, MessageOutputItem>, index: number): void {
    const at = { item_id: item.id, output_index: index };
    this.send("response.output_item.added", {
      output_index: index,
      item: { ...item, arguments: "", status: "in_progress" },
    });
    this.send("response.function_call_arguments.delta", { ...at, delta: item.arguments });
    this.send("response.function_call_arguments.done", { ...at, name: item.name, arguments: item.arguments });
    this.send("response.output_item.done", { output_index: index, item });
  }

  private send(type: string, fields: Record<string, unknown>): void {
    if (!this.open) return;
    const line = `event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: this.sequence, ...fields })}\n\n`;
    this.sequence++;
    this.bytes += Buffer.byteLength(line);
    if (!this.limits || this.bytes <= this.limits.maxResponseBytes) {
      this.res.write(line);
      return;
    }
    const { error } = responseTooLarge(this.limits).body();
    const event = { type: "error", sequence_number: this.sequence, code: error.code, message: error.message, error };
    this.res.end(`event: error\ndata: ${JSON.stringify({ ...event, param: null })}\n\n`);
  }
}
