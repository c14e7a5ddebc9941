import { existsSync } from "node:fs";
import { basename, join, resolve } from "node:path";
import { startServer } from "../../serve/server.js";
import { startTinkerServer } from "../../serve/tinker/server.js";
import { InputError } from "../../util/errors.js";
import { DEFAULT_REQUEST_LIMITS } from "../../serve/request-limits.js";
import {
  noPositionals,
  optionalNumber,
  parseFlags,
  requireString,
  usageError,
  type FlagSpec,
  type Parsed,
} from "../args.js";
import type { Command, CommandIO } from "../command.js";
import { settings } from "../../util/settings.js";
import { BACKEND_FLAG, announceBackend, parseBackendFlag } from "./backend-flag.js";

const D = DEFAULT_REQUEST_LIMITS;

const FLAGS: FlagSpec = {
  model: { type: "string", value: "DIR", description: "the model directory (required)" },
  port: { type: "string", value: "N", description: "port to listen on; 0 picks a free one", fallback: 8000 },
  host: {
    type: "string",
    value: "HOST",
    description: "address to listen on; 0.0.0.0 listens on every interface (set an API key then)",
    fallback: "127.0.0.1",
  },
  name: { type: "string", value: "ID", description: "the model id clients see; default the directory's basename" },
  "max-tokens": {
    type: "string",
    value: "N",
    description:
      "new tokens a chat request gets when it sets no max_tokens; default what is left of the context window",
  },
  "api-key": {
    type: "string",
    value: "KEY",
    description:
      "require 'Authorization: Bearer KEY' on every route but /health (X-API-Key with --tinker); default env AGENT_R1_API_KEY",
  },
  "allow-host": {
    type: "string",
    value: "NAME",
    multiple: true,
    description: "also answer requests whose Host is NAME ('*' for any)",
  },
  "allow-origin": {
    type: "string",
    value: "ORIGIN",
    multiple: true,
    description: "let pages of this origin call the API, with CORS ('*' for any)",
  },
  "max-sequences": {
    type: "string",
    value: "N",
    description: "sequences one request may sample (prompts x n)",
    fallback: D.maxSequences,
  },
  "max-request-tokens": {
    type: "string",
    value: "N",
    description: "tokens one request may cost the engine",
    fallback: D.maxRequestTokens,
  },
  "max-response-bytes": {
    type: "string",
    value: "N",
    description: "bytes of one response, streamed or not",
    fallback: D.maxResponseBytes,
  },
  "weights-from": {
    type: "string",
    value: "DIR",
    description:
      "let POST /update_weights_from_disk and the load_lora_adapter routes load model directories and LoRA adapters inside DIR (an RL trainer's sampler weights)",
  },
  tinker: {
    type: "boolean",
    description:
      "serve the Tinker training protocol instead (Tinker SDK 0.24 JSON to 0.31): train and sample this model remotely",
  },
  "state-dir": {
    type: "string",
    value: "DIR",
    description: "with --tinker: where checkpoints are kept (they outlive a restart)",
    fallback: "runs/tinker-state",
  },
  zstd: { type: "boolean", description: "with --tinker: ask protobuf clients to compress request bodies with zstd" },
  workers: {
    type: "string",
    value: "N",
    description: "engine worker threads per model; 0 runs in the server's thread",
    fallback: "2 on 2+ cores",
  },
  "memory-gb": {
    type: "string",
    value: "GB",
    description:
      "the native engine's memory budget (engine.memoryGb); with --tinker every base model counts once, and each model its LoRA adapters (or full weights), optimizer state and KV cache: a model past it is refused",
    fallback: "75% of physical memory",
  },
  ...BACKEND_FLAG,
};

export const serveCommand: Command = {
  name: "serve",
  summary:
    "serve a model over an OpenAI-compatible HTTP API (chat completions, completions, models), or with --tinker the Tinker training protocol",
  usage: "agent-r1 serve --model DIR [flags]",
  flags: FLAGS,
  async run(argv, io) {
    const { flags, positionals } = parseFlags("serve", argv, FLAGS);
    noPositionals("serve", positionals);
    const model = requireString("serve", flags, "model");
    const port = optionalNumber("serve", flags, "port") ?? 8000;
    if (!Number.isInteger(port) || port < 0 || port > 65535)
      throw usageError("serve", `--port must be an integer in [0, 65535], got '${flags.port}'`);
    const maxTokens = positiveInt(flags, "max-tokens");
    const maxSequences = positiveInt(flags, "max-sequences");
    const maxRequestTokens = positiveInt(flags, "max-request-tokens");
    const maxResponseBytes = positiveInt(flags, "max-response-bytes");
    const backend = parseBackendFlag("serve", flags);
    const host = typeof flags.host === "string" && flags.host !== "" ? flags.host : "127.0.0.1";
    // The key is read here, once: the library takes it as an option and never looks at the environment.
    const apiKey = (flags["api-key"] as string | undefined) ?? settings().apiKey;
    const workers = optionalNumber("serve", flags, "workers");
    if (workers !== undefined && !(Number.isInteger(workers) && workers >= 0))
      throw usageError("serve", `--workers must be a non-negative integer, got '${flags.workers}'`);
    const memoryGb = optionalNumber("serve", flags, "memory-gb");
    if (memoryGb !== undefined && !(memoryGb > 0))
      throw usageError("serve", `--memory-gb must be a positive number, got '${flags["memory-gb"]}'`);
    const engineOptions = {
      backend,
      ...(workers !== undefined ? { workers } : {}),
      ...(memoryGb !== undefined ? { memoryGb } : {}),
    };
    if (flags.tinker === true) {
      const name = (flags.name as string | undefined) ?? basename(resolve(model));
      if (!existsSync(join(model, "config.json")))
        throw new InputError(`serve: ${model}: not a model directory (no config.json)`);
      const tinker = await startTinkerServer({
        baseModels: new Map([[name, model]]),
        stateDir: (flags["state-dir"] as string | undefined) ?? "runs/tinker-state",
        compress: flags.zstd === true,
        host,
        port,
        apiKey,
        allowHosts: flags["allow-host"] as string[] | undefined,
        allowOrigins: flags["allow-origin"] as string[] | undefined,
        // The same per-request bounds as serve: sequences per asample, tokens per request.
        maxSequences,
        maxRequestTokens,
        engineOptions,
        log: io.err,
      });
      io.out(`serving the Tinker protocol for base model '${name}' on ${tinker.url}`);
      await untilSignal(io, () => tinker.close());
      return;
    }

    const server = await startServer({
      model,
      host,
      port,
      name: flags.name as string | undefined,
      defaultMaxTokens: maxTokens,
      apiKey,
      allowHosts: flags["allow-host"] as string[] | undefined,
      allowOrigins: flags["allow-origin"] as string[] | undefined,
      maxSequences,
      maxRequestTokens,
      maxResponseBytes,
      log: io.err,
      engineOptions,
      weightsFrom: flags["weights-from"] as string | undefined,
    });
    announceBackend(backend, io);
    io.out(`serving ${server.modelId} on ${server.url}`);
    if (apiKey === undefined && !isLoopback(host)) {
      io.err(
        `warning: serving on ${host} without an API key: anyone who can reach this port can use the model (set --api-key or AGENT_R1_API_KEY)`,
      );
    }
    await untilSignal(io, () => server.close());
  },
};

/** Serves until SIGINT or SIGTERM, then closes and says so. */
async function untilSignal(io: CommandIO, close: () => Promise<void>): Promise<void> {
  const signal = await new Promise<NodeJS.Signals>((done) => {
    const stop = (s: NodeJS.Signals) => {
      process.off("SIGINT", stop);
      process.off("SIGTERM", stop);
      done(s);
    };
    process.on("SIGINT", stop);
    process.on("SIGTERM", stop);
  });
  await close();
  io.err(`stopped (${signal})`);
}

function positiveInt(flags: Parsed["flags"], name: string): number | undefined {
  const v = optionalNumber("serve", flags, name);
  if (v !== undefined && !(Number.isSafeInteger(v) && v > 0))
    throw usageError("serve", `--${name} must be a positive integer, got '${flags[name]}'`);
  return v;
}

function isLoopback(host: string): boolean {
  return host === "localhost" || host.startsWith("127.") || host === "::1";
}
