/**
 * Cleanups that must run however the process ends: at exit, on an error that ends it, and on
 * SIGINT or SIGTERM. Each is synchronous (at 'exit' nothing else can run) and runs once. Temporary
 * directories (./temp-dirs.ts) and MCP server processes (../tools/mcp-transports.ts) register here,
 * so that one set of signal listeners serves them all.
 *
 * The listeners are installed only while a cleanup is registered. On a signal, when no other code
 * listens for it, every cleanup runs and the signal is raised again with its default action, so the
 * process still ends as killed by it (exit status 130 for SIGINT, 143 for SIGTERM). When other code
 * listens (`serve`, `dashboard` close gracefully on SIGINT), the signal is theirs: the cleanups run
 * at exit instead. SIGKILL cannot be caught: after one, nothing runs.
 */

const cleanups = new Set<() => void>();
// Not SIGHUP: under nohup it is ignored, and a listener here would turn it back into a kill.
const SIGNALS: NodeJS.Signals[] = ["SIGINT", "SIGTERM"];
let hooked = false;

/** Registers `cleanup` to run when the process ends; the function returned unregisters it (without running it). */
export function onProcessEnd(cleanup: () => void): () => void {
  const entry = () => cleanup();
  cleanups.add(entry);
  hook();
  return () => {
    cleanups.delete(entry);
    if (cleanups.size === 0) unhook();
  };
}

function runAll(): void {
  const all = [...cleanups];
  cleanups.clear();
  for (const c of all) {
    try {
      c();
    } catch {
      // the process is ending: nothing better to do with the error
    }
  }
}

function onSignal(signal: NodeJS.Signals): void {
  if (process.listenerCount(signal) > 1) return; // someone else handles it; 'exit' cleans up
  runAll();
  unhook();
  process.kill(process.pid, signal); // no listener left: the default action, death by the signal
}

function hook(): void {
  if (hooked) return;
  hooked = true;
  process.on("exit", runAll);
  for (const s of SIGNALS) process.on(s, onSignal);
}

function unhook(): void {
  if (!hooked) return;
  hooked = false;
  process.off("exit", runAll);
  for (const s of SIGNALS) process.off(s, onSignal);
}
