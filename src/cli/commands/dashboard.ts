import { DEFAULT_HOST, DEFAULT_PORT, startDashboard } from "../../dashboard/server.js";
import { helpHint, optionalNumber, parseFlags, usageError, type FlagSpec } from "../args.js";
import type { Command } from "../command.js";
import { isLoopback } from "../../util/host-guard.js";
import { settings } from "../../util/settings.js";

const FLAGS: FlagSpec = {
  port: { type: "string", value: "N", description: "port to listen on; 0 picks a free one", fallback: DEFAULT_PORT },
  host: {
    type: "string",
    value: "HOST",
    description: "address to listen on; 0.0.0.0 exposes the page to the network",
    fallback: DEFAULT_HOST,
  },
  "allow-host": {
    type: "string",
    value: "NAME",
    multiple: true,
    description: "also answer under this Host name ('*' for any)",
  },
  "allow-origin": {
    type: "string",
    value: "ORIGIN",
    multiple: true,
    description: "let pages of this origin read the JSON API ('*' for any)",
  },
  "api-key": {
    type: "string",
    value: "KEY",
    description:
      "require the key on every request: open the page as URL/?key=KEY once (a cookie keeps it), or send 'Authorization: Bearer KEY'; default env AGENT_R1_DASHBOARD_KEY",
  },
};

export const dashboardCommand: Command = {
  name: "dashboard",
  summary: "serve a live web page of a run's metrics and sample trajectories",
  usage: "agent-r1 dashboard RUN_DIR [flags]",
  flags: FLAGS,
  async run(argv, io) {
    const { flags, positionals } = parseFlags("dashboard", argv, FLAGS);
    if (positionals.length === 0) throw usageError("dashboard", "RUN_DIR is required", helpHint("dashboard"));
    if (positionals.length > 1)
      throw usageError("dashboard", `unexpected argument '${positionals[1]}'`, "give one RUN_DIR");
    const run = positionals[0];
    const port = optionalNumber("dashboard", flags, "port") ?? DEFAULT_PORT;
    if (!Number.isInteger(port) || port < 0 || port > 65535)
      throw usageError("dashboard", `--port must be an integer from 0 to 65535, got '${flags.port}'`);
    const host = (flags.host as string | undefined) ?? DEFAULT_HOST;
    const apiKey = (flags["api-key"] as string | undefined) ?? settings().dashboardKey;
    const dash = await startDashboard({
      apiKey,
      runDir: run,
      port,
      host,
      allowHosts: flags["allow-host"] as string[] | undefined,
      allowOrigins: flags["allow-origin"] as string[] | undefined,
    });
    io.out(`dashboard for ${run} on ${dash.url}${apiKey !== undefined ? " (open it with ?key=KEY)" : ""}`);
    if (apiKey === undefined && !isLoopback(host))
      io.err(
        `warning: the dashboard on ${host} has no key: anyone who can reach this port can read the run's config and samples (set --api-key or AGENT_R1_DASHBOARD_KEY)`,
      );
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
