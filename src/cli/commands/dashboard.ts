import { DEFAULT_HOST, DEFAULT_PORT, startDashboard } from "../../dashboard/server.js";
import { optionalNumber, parseFlags } from "../args.js";
import { InputError } from "../../util/errors.js";
import type { Command } from "../command.js";

export const dashboardCommand: Command = {
  name: "dashboard",
  summary: "serve a live web page of a run's metrics and sample trajectories",
  usage:
    `agent-r1 dashboard RUN_DIR [--port N] [--host HOST] [--allow-host NAME] [--allow-origin ORIGIN]  (defaults: --port ${DEFAULT_PORT} --host ${DEFAULT_HOST}; ` +
    "--port 0 picks a free port; --allow-host accepts another Host name the page is reached under and --allow-origin lets another site's pages read the API, " +
    "each repeatable, '*' for any)",
  async run(argv, io) {
    const { flags, positionals } = parseFlags("dashboard", argv, {
      port: { type: "string" },
      host: { type: "string" },
      "allow-host": { type: "string", multiple: true },
      "allow-origin": { type: "string", multiple: true },
    });
    if (positionals.length === 0) throw new InputError("dashboard: RUN_DIR is required", "run 'agent-r1 dashboard --help'");
    if (positionals.length > 1) throw new InputError(`dashboard: unexpected argument '${positionals[1]}'`, "give one RUN_DIR");
    const run = positionals[0];
    const port = optionalNumber("dashboard", flags, "port") ?? DEFAULT_PORT;
    if (!Number.isInteger(port) || port < 0 || port > 65535) throw new InputError(`dashboard: --port must be an integer from 0 to 65535, got '${flags.port}'`);
    const host = (flags.host as string | undefined) ?? DEFAULT_HOST;
    const dash = await startDashboard({ runDir: run, port, host, allowHosts: flags["allow-host"] as string[] | undefined, allowOrigins: flags["allow-origin"] as string[] | undefined });
    io.out(`dashboard for ${run} on ${dash.url}`);
    // Serve until interrupted, then close cleanly so the command returns (exit code 0).
    await new Promise<void>((done) => {
      const stop = () => {
        process.off("SIGINT", stop);
        process.off("SIGTERM", stop);
        done();
      };
      process.on("SIGINT", stop);
      process.on("SIGTERM", stop);
    });
    await dash.close();
  },
};
