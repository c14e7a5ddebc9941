/**
 * The LoRA routes of `agent-r1 serve` (the adapters themselves: ./lora-adapters.ts), in both
 * inference servers' shapes, so an RL trainer's sampler client (src/engine/remote/sampler-client.ts)
 * runs against this server as against theirs:
 *   vLLM:   POST /v1/load_lora_adapter {lora_name, lora_path, load_inplace?}
 *           POST /v1/unload_lora_adapter {lora_name}
 *           -> 200 with a line of text ("Success: ..."); errors as error objects (400, 403, 404).
 *   SGLang: POST /load_lora_adapter {lora_name, lora_path}, POST /unload_lora_adapter {lora_name}
 *           -> {success, error_message, loaded_adapters: {name: path}}, 400 when it failed.
 * A loaded adapter is then asked for by name: vLLM's `model` field, SGLang's `lora_path`.
 */
import type { ServerResponse } from "node:http";
import { z } from "zod";
import { sendBytes } from "../http/send.js";
import { toApiError } from "./errors.js";
import { sendJson } from "./http.js";
import type { LoraAdapters } from "./lora-adapters.js";
import { parseRequest } from "./schemas.js";

const name = z.string().min(1).max(256);
const loadSchema = z.object({ lora_name: name, lora_path: z.string().min(1), load_inplace: z.boolean().nullish() });
const unloadSchema = z.object({ lora_name: name });

function sendLine(res: ServerResponse, line: string): void {
  sendBytes(res, 200, "text/plain; charset=utf-8", Buffer.from(line));
}

export async function vllmLoadAdapter(adapters: LoraAdapters, body: unknown, res: ServerResponse): Promise<void> {
  const req = parseRequest(loadSchema, body);
  await adapters.load(req.lora_name, req.lora_path, req.load_inplace === true);
  sendLine(res, `Success: LoRA adapter '${req.lora_name}' added successfully.`);
}

export function vllmUnloadAdapter(adapters: LoraAdapters, body: unknown, res: ServerResponse): void {
  const req = parseRequest(unloadSchema, body);
  adapters.unload(req.lora_name);
  sendLine(res, `Success: LoRA adapter '${req.lora_name}' removed successfully.`);
}

/** SGLang's answer to a load or unload: what is loaded now, and the error when it failed. */
async function sglangAnswer(adapters: LoraAdapters, res: ServerResponse, change: () => unknown): Promise<void> {
  let error: string | null = null;
  try {
    await change();
  } catch (e) {
    error = toApiError(e).message;
  }
  const loaded = Object.fromEntries(adapters.list().map(([n, a]) => [n, a.source]));
  sendJson(res, error === null ? 200 : 400, { success: error === null, error_message: error, loaded_adapters: loaded });
}

export function sglangLoadAdapter(adapters: LoraAdapters, body: unknown, res: ServerResponse): Promise<void> {
  const req = parseRequest(loadSchema, body);
  return sglangAnswer(adapters, res, () => adapters.load(req.lora_name, req.lora_path));
}

export function sglangUnloadAdapter(adapters: LoraAdapters, body: unknown, res: ServerResponse): Promise<void> {
  const req = parseRequest(unloadSchema, body);
  return sglangAnswer(adapters, res, () => adapters.unload(req.lora_name));
}
