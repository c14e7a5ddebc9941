/**
 * Stored responses, for `previous_response_id`, `item_reference` input items and
 * GET /responses/{id}: each response's answer object and its conversation (every message up to
 * and including its output, without its instructions, which a later request does not inherit),
 * and its output items by id. Bounded: past `maxResponses` responses or about `maxBytes` of them
 * (their JSON size), the least recently used go first, with their items.
 */
import type { OutputItem } from "./responses-items.js";
import type { RequestMessage } from "./schemas.js";

export interface StoredResponse {
  id: string;
  /** The answer object as it was sent (its status, output, usage). */
  body: { output: OutputItem[] } & Record<string, unknown>;
  /** The conversation up to and including this response's output, instructions left out. */
  conversation: RequestMessage[];
}

export interface ResponseStoreOptions {
  /** Default 1,000. */
  maxResponses?: number;
  /** Default 64 MiB. */
  maxBytes?: number;
}

export class ResponseStore {
  /** In use order: the first is the least recently used. */
  private readonly responses = new Map<string, { stored: StoredResponse; bytes: number }>();
  private readonly items = new Map<string, OutputItem>();
  private bytes = 0;
  private readonly maxResponses: number;
  private readonly maxBytes: number;

  constructor(o: ResponseStoreOptions = {}) {
    this.maxResponses = o.maxResponses ?? 1_000;
    this.maxBytes = o.maxBytes ?? 64 << 20;
  }

  get size(): number {
    return this.responses.size;
  }

  /** The response, now the most recently used; undefined when unknown or evicted. */
  get(id: string): StoredResponse | undefined {
    const entry = this.responses.get(id);
    if (!entry) return undefined;
    this.responses.delete(id);
    this.responses.set(id, entry);
    return entry.stored;
  }

  /** An output item of a stored response. */
  item(id: string): OutputItem | undefined {
    return this.items.get(id);
  }

  put(stored: StoredResponse): void {
    this.delete(stored.id);
    const bytes = JSON.stringify(stored.conversation).length + JSON.stringify(stored.body).length;
    this.responses.set(stored.id, { stored, bytes });
    this.bytes += bytes;
    for (const item of stored.body.output) this.items.set(item.id, item);
    for (const id of this.responses.keys()) {
      if (this.responses.size <= this.maxResponses && this.bytes <= this.maxBytes) break;
      if (id !== stored.id) this.delete(id);
    }
  }

  /** Forgets a response and its items; false when it was not stored. */
  delete(id: string): boolean {
    const entry = this.responses.get(id);
    if (!entry) return false;
    this.responses.delete(id);
    this.bytes -= entry.bytes;
    for (const item of entry.stored.body.output) this.items.delete(item.id);
    return true;
  }
}
