import { InputError } from "../../util/errors.js";
import { startServer } from "../../serve/server.js";
import { DEFAULT_REQUEST_LIMITS } from "../../serve/request-limits.js";
import { optionalNumber, parseFlags, requireString, type Parsed } from "../args.js";
import type { Command } from "../command.js";
import { settings } from "../../util/settings.js";
import { BACKEND_FLAG, BACKEND_USAGE, backendFromFlags } from "./backend-flag.js";

const D = DEFAULT_REQUEST_LIMITS;

export const serveCommand: Command = {
  name: "serve",
  summary: "serve a model over an OpenAI-compatible HTTP API (chat completions, completions, models)",
  usage:
    "agent-r1 serve --model DIR [--port N (default 8000; 0 picks a free one)] [--host 127.0.0.1] [--name ID] [--max-tokens N] " +
    "[--api-key KEY (or env AGENT_R1_API_KEY): require 'Authorization: Bearer KEY' on /v1/*] " +
    "[--allow-host NAME ('*' for any; repeatable)] [--allow-origin ORIGIN ('*' for any; repeatable)] " +
    `[--max-sequences N (default ${D.maxSequences})] [--max-request-tokens N (default ${D.maxRequestTokens})] [--max-response-bytes N (default ${D.maxResponseBytes})] ` +
    BACKEND_USAGE,
  async run(argv, io) {
    const { flags, positionals } = parseFlags("serve", argv, {
      model: { type: "string" },
      port: { type: "string" },
      host: { type: "string" },
      name: { type: "string" },
      "max-tokens": { type: "string" },
      "api-key": { type: "string" },
      "allow-host": { type: "string", multiple: true },
      "allow-origin": { type: "string", multiple: true },
      "max-sequences": { type: "string" },
      "max-request-tokens": { type: "string" },
      "max-response-bytes": { type: "string" },
      ...BACKEND_FLAG,
    });
    if (positionals.length > 0) throw new InputError(`serve: unexpected argument '${positionals[0]}'`, "run 'agent-r1 serve --help'");
    const model = requireString("serve", flags, "model");
    const port = optionalNumber("serve", flags, "port") ?? 8000;
    if (!Number.isInteger(port) || port < 0 || port > 65535) throw new InputError(`serve: --port must be an integer in [0, 65535], got '${flags.port}'`);
    const maxTokens = positiveInt(flags, "max-tokens");
    const host = typeof flags.host === "string" && flags.host !== "" ? flags.host : "127.0.0.1";
    // The key is read here, once: the library takes it as an option and never looks at the environment.
    const apiKey = (flags["api-key"] as string | undefined) ?? settings().apiKey;

    const backend = backendFromFlags("serve", flags, io);
    const server = await startServer({
      model,
      host,
      port,
      name: flags.name as string | undefined,
      defaultMaxTokens: maxTokens,
      apiKey,
      allowHosts: flags["allow-host"] as string[] | undefined,
      allowOrigins: flags["allow-origin"] as string[] | undefined,
      maxSequences: positiveInt(flags, "max-sequences"),
      maxRequestTokens: positiveInt(flags, "max-request-tokens"),
      maxResponseBytes: positiveInt(flags, "max-response-bytes"),
      log: io.err,
      engineOptions: { backend },
    });
    io.out(`serving ${server.modelId} on ${server.url}`);
    if (apiKey === undefined && !isLoopback(host)) {
      io.err(`warning: serving on ${host} without an API key: anyone who can reach this port can use the model (set --api-key or AGENT_R1_API_KEY)`);
    }
    const signal = await new Promise<NodeJS.Signals>((resolve) => {
      const stop = (s: NodeJS.Signals) => {
        process.off("SIGINT", stop);
        process.off("SIGTERM", stop);
        resolve(s);
      };
      process.on("SIGINT", stop);
      process.on("SIGTERM", stop);
    });
    await server.close();
    io.err(`stopped (${signal})`);
  },
};

function positiveInt(flags: Parsed["flags"], name: string): number | undefined {
  const v = optionalNumber("serve", flags, name);
  if (v !== undefined && !(Number.isSafeInteger(v) && v > 0)) throw new InputError(`serve: --${name} must be a positive integer, got '${flags[name]}'`);
  return v;
}

function isLoopback(host: string): boolean {
  return host === "localhost" || host.startsWith("127.") || host === "::1";
}
