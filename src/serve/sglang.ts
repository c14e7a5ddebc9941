/**
 * SGLang's native routes on `agent-r1 serve`, so an RL sampler client written for SGLang (ours,
 * src/engine/remote/sampler-client.ts) runs against this server too:
 *   POST /generate {input_ids: int[] | int[][], sampling_params: {max_new_tokens, temperature, top_p,
 *     top_k, stop_token_ids, n, sampling_seed}, return_logprob, lora_path (a loaded adapter's name)}
 *     -> {output_ids, text, meta_info: {finish_reason: {type}, prompt_tokens, completion_tokens,
 *        output_token_logprobs: [[logprob, token_id, null], ...]}} (a list for a batch or n > 1)
 *   POST /update_weights_from_disk {model_path} -> {success, message}: the served engine loads the
 *     weights of that model directory (the same architecture), as SGLang does between RL steps.
 * Text prompts and string stops are not taken here (the sampler speaks token ids).
 */
import type { ServerResponse } from "node:http";
import { z } from "zod";
import type { ServeContext } from "./context.js";
import { badRequest, ApiError } from "./errors.js";
import { sendJson } from "./http.js";
import { parseRequest } from "./schemas.js";
import { checkRequestTokens, checkSequences } from "./request-limits.js";
import { roomAfter } from "./sampling-options.js";
import { underRoot } from "./weights-root.js";

const ids = z.array(z.number().int().min(0)).min(1);

const generateSchema = z.object({
  input_ids: z.union([ids, z.array(ids).min(1)], { error: "expected token ids, or a batch of them" }),
  sampling_params: z
    .object({
      max_new_tokens: z.number().int().min(1).nullish(),
      temperature: z.number().min(0).nullish(),
      top_p: z.number().gt(0).max(1).nullish(),
      top_k: z.number().int().min(-1).nullish(),
      stop_token_ids: z.array(z.number().int().min(0)).max(64).nullish(),
      n: z.number().int().min(1).nullish(),
      sampling_seed: z.number().int().nullish(),
    })
    .prefault({}),
  return_logprob: z.boolean().nullish(),
  stream: z.boolean().nullish(),
  /** The name of a loaded LoRA adapter to sample with (one for every prompt, or one per prompt). */
  lora_path: z.union([z.string(), z.array(z.string().nullable())]).nullish(),
});

/** The context each prompt samples in: the base model's, or the LoRA adapter `lora_path` names for it. */
function promptContexts(ctx: ServeContext, lora: string | (string | null)[] | null | undefined, prompts: number) {
  if (Array.isArray(lora) && lora.length !== prompts)
    throw badRequest(`lora_path names ${lora.length} adapters for ${prompts} prompts`, "lora_path");
  return Array.from({ length: prompts }, (_, i) =>
    ctx.forModel((Array.isArray(lora) ? lora[i] : lora) ?? undefined, "lora_path"),
  );
}

export async function generate(ctx: ServeContext, body: unknown, res: ServerResponse): Promise<void> {
  const req = parseRequest(generateSchema, body);
  if (req.stream) throw badRequest("stream is not supported by this server's /generate", "stream");
  const batch = typeof req.input_ids[0] === "number" ? [req.input_ids as number[]] : (req.input_ids as number[][]);
  const p = req.sampling_params;
  const n = p.n ?? 1;
  const contexts = promptContexts(ctx, req.lora_path, batch.length);
  checkSequences(ctx.limits, batch.length, n);
  const vocab = ctx.engine.config.vocabSize;
  const budgets = batch.map((prompt, i) => {
    const bad = prompt.find((t) => t >= vocab);
    if (bad !== undefined)
      throw badRequest(`token id ${bad} is outside the vocabulary [0, ${vocab})`, `input_ids.${i}`);
    return Math.min(p.max_new_tokens ?? 128, roomAfter(ctx, prompt.length, `input_ids.${i}`));
  });
  checkRequestTokens(
    ctx.limits,
    {
      promptTokens: batch.reduce((s, q) => s + q.length, 0),
      newTokens: n * budgets.reduce((s, b) => s + b, 0),
      scoredTokens: 0,
    },
    "sampling_params.max_new_tokens",
  );
  const eos = ctx.engine.tokenizer.eosTokenId;
  const stop = [...(eos !== undefined ? [eos] : []), ...(p.stop_token_ids ?? [])];
  const gone = new AbortController();
  let done = false;
  res.on("close", () => done || gone.abort());
  const results = await Promise.all(
    batch.map((prompt, i) =>
      contexts[i].engine.sample(prompt, {
        n,
        maxTokens: budgets[i],
        temperature: p.temperature ?? 1,
        topP: p.top_p ?? 1,
        topK: p.top_k && p.top_k > 0 ? p.top_k : 0,
        stop,
        ...(p.sampling_seed != null ? { seed: p.sampling_seed } : {}),
        signal: gone.signal,
      }),
    ),
  ).catch((e: unknown) => (gone.signal.aborted ? undefined : Promise.reject(e)));
  done = true;
  if (!results) return;
  const outs = results.flatMap((r, i) =>
    r.sequences.map((s) => ({
      text: ctx.engine.tokenizer.decode(s.tokens),
      output_ids: s.tokens,
      meta_info: {
        finish_reason: { type: s.stopReason },
        prompt_tokens: batch[i].length,
        completion_tokens: s.tokens.length,
        ...(req.return_logprob ? { output_token_logprobs: s.tokens.map((t, j) => [s.logprobs[j], t, null]) } : {}),
      },
    })),
  );
  sendJson(res, 200, outs.length === 1 && typeof req.input_ids[0] === "number" && n === 1 ? outs[0] : outs);
}

const updateSchema = z.object({ model_path: z.string().min(1) });

/** A served engine that can load other weights in place (LocalEngine). */
interface Reloadable {
  load(dir: string): Promise<void>;
}

/**
 * Loads weights from a directory under `root` (serve's --weights-from); without a root the route is
 * refused, since it makes the server read model files named by the client.
 */
export async function updateWeightsFromDisk(
  ctx: ServeContext,
  body: unknown,
  res: ServerResponse,
  root: string | undefined,
): Promise<void> {
  const req = parseRequest(updateSchema, body);
  if (root === undefined)
    throw new ApiError(403, "weight updates are off: start serve with --weights-from DIR to allow loading from DIR", {
      code: "forbidden",
    });
  const where = underRoot(root, req.model_path);
  if (!("real" in where))
    throw new ApiError(403, `model_path must be a directory inside ${root} (serve's --weights-from)`, {
      code: "forbidden",
    });
  const engine = ctx.engine as Partial<Reloadable>;
  if (typeof engine.load !== "function")
    throw new ApiError(501, "this server's engine cannot load weights in place", { code: "not_implemented" });
  try {
    await engine.load(where.real);
  } catch (e) {
    return sendJson(res, 200, { success: false, message: e instanceof Error ? e.message : String(e) });
  }
  sendJson(res, 200, { success: true, message: `loaded ${req.model_path}` });
}
