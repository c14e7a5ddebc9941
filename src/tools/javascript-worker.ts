/**
 * Worker-thread entry of the JavaScript sandbox: one QuickJS module (memory
 * capped at the limit), one run at a time. After a run that left the module in
 * an unknown state it replies `fatal: true` and stops taking work; the pool
 * then ends this thread and starts another.
 */
import { parentPort, workerData } from "node:worker_threads";
import { loadQuickJS, runInQuickJS, type SandboxLimits, type SandboxResult } from "./javascript-sandbox.js";

export interface SandboxRequest {
  code: string;
}

export type SandboxReply =
  { ready: true } | { ready: false; error: string } | { result: SandboxResult; fatal: boolean };

const port = parentPort!;
const { limits } = workerData as { limits: SandboxLimits };

loadQuickJS(limits.memoryLimitBytes).then(
  (qjs) => {
    let retired = false;
    port.on("message", (req: SandboxRequest) => {
      if (retired) return;
      let reply: SandboxReply;
      try {
        const { result, healthy } = runInQuickJS(qjs, req.code, limits);
        reply = { result, fatal: !healthy };
      } catch (err) {
        // Disposing the runtime failed (a QuickJS assertion): the module cannot be trusted any more.
        const message = `internal: the sandbox failed (${(err as Error)?.message || String(err)}); it was reset`;
        reply = {
          result: { ok: false, output: "", outputDropped: 0, error: { kind: "internal", message }, ms: 0 },
          fatal: true,
        };
      }
      retired = reply.fatal;
      port.postMessage(reply);
    });
    port.postMessage({ ready: true } satisfies SandboxReply);
  },
  (err) => port.postMessage({ ready: false, error: (err as Error)?.message ?? String(err) } satisfies SandboxReply),
);
