/**
 * A client shared across episodes still reaches the right one. Agent frameworks cache a client (the
 * OpenAI Agents SDK's `setDefaultOpenAIClient`, a module-level `new OpenAI()`), so every episode's
 * requests leave with the first episode's URL and key. Each agent runs inside its own async context
 * (agent-rollout.ts), and every client library sends through `fetch`: while that context is an
 * episode's, a request to an episode URL of any gateway this process started (a client made in an
 * earlier iteration holds an earlier gateway's address) is sent to that episode's own URL with its
 * own key instead. Nothing else is touched: other URLs, requests made outside an agent, and
 * requests already addressed to the right episode pass through as they are.
 *
 * Installed once, when the gateway's rollout module loads, so that a client made afterwards (a
 * user module imported by the trainer) picks it up. A client made before it (holding the original
 * `fetch`) is not rerouted; its requests are then caught as another row's conversation or as
 * concurrent requests, and the episodes fail with the fix (episode-recorder.ts).
 */

/** The episode an agent's async context belongs to: where its requests must go. */
export interface EpisodeRoute {
  /** The episode's own base URL (`{gateway}/episodes/{id}/v1`). */
  baseURL: string;
  apiKey: string;
}

/** Base URLs of the gateways this process has started (a few per run: one per rollout). */
const gateways = new Set<string>();

/** Notes a started gateway's base URL (`http://127.0.0.1:PORT`): its episode URLs may be rerouted. */
export function registerGateway(url: string): void {
  gateways.add(url);
}

let installed = false;
let unwrapped: typeof fetch | undefined;

/** The fetch from before the wrapping (what a client made earlier holds), or the global one. */
export const originalFetch = (): typeof fetch => unwrapped ?? globalThis.fetch;

/** Wraps the global fetch once; `current` gives the route of the calling agent's episode, if any. */
export function installEpisodeFetch(current: () => EpisodeRoute | undefined): void {
  if (installed || typeof globalThis.fetch !== "function") return;
  installed = true;
  const original = globalThis.fetch;
  unwrapped = original;
  const rerouting: typeof fetch = (input, init) => {
    const route = current();
    if (!route || (typeof input !== "string" && !(input instanceof URL))) return original(input, init);
    const url = String(input);
    const target = reroute(url, route);
    if (target === undefined) return original(input, init);
    const headers = new Headers(init?.headers);
    headers.set("authorization", `Bearer ${route.apiKey}`);
    return original(target, { ...init, headers });
  };
  globalThis.fetch = rerouting;
}

/** The URL `url` becomes for `route`'s episode, or undefined when it is not another episode's URL. */
export function reroute(url: string, route: EpisodeRoute, known: ReadonlySet<string> = gateways): string | undefined {
  if (url.startsWith(route.baseURL + "/") || url === route.baseURL) return undefined;
  const m = /^(https?:\/\/[^/]+)\/episodes\/[A-Za-z0-9-]+\/v1(\/.*|)$/.exec(url);
  return m && known.has(m[1]) ? route.baseURL + m[2] : undefined;
}
