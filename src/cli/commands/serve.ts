import { InputError } from "../../util/errors.js";
import { startServer } from "../../serve/server.js";
import { optionalNumber, parseFlags, requireString } from "../args.js";
import type { Command } from "../command.js";
import { BACKEND_FLAG, BACKEND_USAGE, backendFromFlags } from "./backend-flag.js";

export const serveCommand: Command = {
  name: "serve",
  summary: "serve a model over an OpenAI-compatible HTTP API (chat completions, completions, models)",
  usage: "agent-r1 serve --model DIR [--port N (default 8000; 0 picks a free one)] [--host 127.0.0.1] [--name ID] [--max-tokens N] " + BACKEND_USAGE,
  async run(argv, io) {
    const { flags, positionals } = parseFlags("serve", argv, {
      model: { type: "string" },
      port: { type: "string" },
      host: { type: "string" },
      name: { type: "string" },
      "max-tokens": { type: "string" },
      ...BACKEND_FLAG,
    });
    if (positionals.length > 0) throw new InputError(`serve: unexpected argument '${positionals[0]}'`, "run 'agent-r1 serve --help'");
    const model = requireString("serve", flags, "model");
    const port = optionalNumber("serve", flags, "port") ?? 8000;
    if (!Number.isInteger(port) || port < 0 || port > 65535) throw new InputError(`serve: --port must be an integer in [0, 65535], got '${flags.port}'`);
    const maxTokens = optionalNumber("serve", flags, "max-tokens");
    if (maxTokens !== undefined && !(Number.isInteger(maxTokens) && maxTokens > 0)) throw new InputError(`serve: --max-tokens must be a positive integer, got '${flags["max-tokens"]}'`);
    const host = typeof flags.host === "string" && flags.host !== "" ? flags.host : "127.0.0.1";

    const backend = backendFromFlags("serve", flags, io);
    const server = await startServer({ model, host, port, name: flags.name as string | undefined, defaultMaxTokens: maxTokens, log: io.err, engineOptions: { backend } });
    io.out(`serving ${server.modelId} on ${server.url}`);
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
