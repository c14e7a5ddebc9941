/**
 * The process-level guard of agent rollouts. Agents run in this process, so a promise one leaves
 * rejected and unhandled, or an exception it throws in a timer or an event callback, would end the
 * process through Node's default handlers. While agent rollouts run (and for a short grace after
 * the last one ends) listeners here take them instead: each agent runs in its own async context
 * (`agentScope`), so what its code left behind is pinned on its episode, which fails; what comes
 * from an episode that has ended, or from nowhere known, is logged once per message and counted.
 * An exception from nowhere known is Node's to report, as it always was. The same async context
 * routes the agent's requests to its own episode (episode-fetch.ts).
 */
import { AsyncLocalStorage } from "node:async_hooks";
import { installEpisodeFetch, type EpisodeRoute } from "./episode-fetch.js";
import { describeThrown } from "../util/describe-thrown.js";

/** A rollout holding the process-level guard: where its lines go and the rejections it was told of. */
export interface GuardHolder {
  log: (line: string) => void;
  unhandled: number;
}

/** One running agent, as the async context its code runs in carries it. */
export interface LiveEpisode {
  id: string;
  where: string;
  holder: GuardHolder;
  ended: boolean;
  /** Why it fails: the first rejection or exception its code left unhandled, if any. */
  stray?: string;
  abort: AbortController;
  /** Where its agent's requests go, whatever client sends them (episode-fetch.ts). */
  route: EpisodeRoute;
}

/** After the last agent rollout ends, how long its agents' leftover promises are still taken care of. */
const GUARD_GRACE_MS = 2_000;

export function toStderr(line: string): void {
  process.stderr.write(line + "\n");
}

export const agentScope = new AsyncLocalStorage<LiveEpisode>();
installEpisodeFetch(() => agentScope.getStore()?.route);
const guard = {
  holders: new Set<GuardHolder>(),
  installed: false,
  timer: undefined as NodeJS.Timeout | undefined,
  /** Messages already logged (a few hundred at most). */
  seen: new Set<string>(),
  lastLog: toStderr as (line: string) => void,
};

/** What an agent left behind, pinned on its episode while it runs (it fails), else logged once per message. */
function leftBehind(what: string, text: string, ep: LiveEpisode | undefined): void {
  if (ep && !ep.ended) {
    ep.holder.unhandled++;
    if (ep.stray === undefined) {
      ep.stray = `the agent left ${what}: ${text}`;
      ep.abort.abort(new Error(ep.stray));
    }
    return;
  }
  if (ep) ep.holder.unhandled++;
  else for (const h of guard.holders) h.unhandled++;
  if (guard.seen.has(text) || guard.seen.size >= 256) return;
  guard.seen.add(text);
  const log = ep?.holder.log ?? [...guard.holders][0]?.log ?? guard.lastLog;
  safeLog(log, `an agent left ${what}${ep ? ` (${ep.where}, after it ended)` : ""}: ${text}; the run goes on`);
}

function onUnhandledRejection(reason: unknown): void {
  leftBehind("a promise rejection unhandled", describeThrown(reason), agentScope.getStore());
}

/**
 * An exception thrown in a callback (a timer, an event) with nobody to catch it. An agent's (its async
 * context says so) fails its episode; any other is left to Node, which ends the process as it would
 * have (unless someone else listens for these).
 */
function onUncaughtException(err: unknown): void {
  const ep = agentScope.getStore();
  if (ep) return leftBehind("an exception uncaught", describeThrown(err), ep);
  if (process.listenerCount("uncaughtException") > 1) return;
  process.off("uncaughtException", onUncaughtException);
  process.nextTick(() => {
    throw err;
  });
}

export function holdGuard(holder: GuardHolder): void {
  guard.holders.add(holder);
  guard.lastLog = holder.log;
  clearTimeout(guard.timer);
  guard.timer = undefined;
  if (!guard.installed) {
    process.on("unhandledRejection", onUnhandledRejection);
    process.on("uncaughtException", onUncaughtException);
    guard.installed = true;
  }
}

export function releaseGuard(holder: GuardHolder): void {
  guard.holders.delete(holder);
  if (guard.holders.size > 0 || guard.timer) return;
  guard.timer = setTimeout(() => {
    guard.timer = undefined;
    if (guard.holders.size > 0) return;
    process.off("unhandledRejection", onUnhandledRejection);
    process.off("uncaughtException", onUncaughtException);
    guard.installed = false;
    guard.seen.clear();
    agentScope.disable();
  }, GUARD_GRACE_MS);
  guard.timer.unref();
}

export function safeLog(log: ((line: string) => void) | undefined, line: string): void {
  try {
    log?.(line);
  } catch {
    // a log that throws loses its line, not the run
  }
}
