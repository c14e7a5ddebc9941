/**
 * The Tinker SDK generations this project speaks, on both sides, and what each one gets on the
 * wire. One table, read by the client (which version it reports and how it talks) and by `serve
 * --tinker` (which versions it answers, and how, for the session that reported one):
 *  - 0.24.x: JSON bodies and results;
 *  - from 0.25.0: forward_backward bodies in protobuf, sample and forward_backward results read as
 *    protobuf; the asample acknowledgement's `sample_sequence_ids` are read and checked when a
 *    server sends them;
 *  - from 0.27.0: `sample_sequence_ids` are required (the SDK refuses a sample without them);
 *  - from 0.31.0 (the newest SDK whose source is published): completions polled per sampling
 *    session through `retrieve_futures` where the server's client config turns it on, and
 *    `client/dynamic_config` with `cancel_future` for samples the client abandons.
 * Authentication (API key, JWT exchange, a credential command) and the `create_session` messages
 * do not depend on the version. Versions past the newest are refused: nothing says what they send.
 */

/** The oldest SDK version spoken: the JSON generation as SkyRL's and miles' servers pin it. */
export const OLDEST_SDK = "0.24.0";
/** The newest SDK version whose source is published (its pyproject.toml), and so the newest spoken. */
export const NEWEST_SDK = "0.31.0";

/** Whether `version` (x.y.z) is at least `min`. */
export function versionAtLeast(version: string, min: string): boolean {
  const a = version.split(".").map(Number),
    b = min.split(".").map(Number);
  for (let i = 0; i < 3; i++) {
    const x = a[i] ?? 0,
      y = b[i] ?? 0;
    if (x !== y) return x > y;
  }
  return true;
}

/** What a version gets on the wire. */
export interface WireFeatures {
  /** forward_backward bodies and sample / forward_backward results in protobuf. */
  protobuf: boolean;
  /** The asample acknowledgement's per-sequence ids: not read, read when sent, or required. */
  sampleIds: "none" | "checked" | "required";
  /** Sample completions polled per sampling session (`retrieve_futures`), when the server turns it on. */
  sessionPolling: boolean;
  /** `client/dynamic_config`, and `cancel_future` for abandoned samples when it enables them. */
  cancel: boolean;
}

/** The features of a version (one this table speaks; see sdkVersionProblem). */
export function wireFeatures(version: string): WireFeatures {
  const newest = versionAtLeast(version, "0.31.0");
  return {
    protobuf: versionAtLeast(version, "0.25.0"),
    sampleIds: versionAtLeast(version, "0.27.0") ? "required" : versionAtLeast(version, "0.25.0") ? "checked" : "none",
    sessionPolling: newest,
    cancel: newest,
  };
}

/** Why `version` cannot be spoken ("is newer than ..."), or undefined when it can. */
export function sdkVersionProblem(version: string): string | undefined {
  if (!/^\d+\.\d+\.\d+$/.test(version)) return `'${version}' is not a version x.y.z`;
  if (!versionAtLeast(version, OLDEST_SDK)) return `${version} is older than ${OLDEST_SDK}, the oldest spoken here`;
  if (version !== NEWEST_SDK && versionAtLeast(version, NEWEST_SDK))
    return `${version} is newer than ${NEWEST_SDK}, the newest SDK whose source is published (what it sends is not known)`;
  return undefined;
}

/** The names of the features, as `serve --tinker` lists them in its client config. */
export const FEATURE_NAMES = [
  "json",
  "protobuf",
  "zstd",
  "sample_sequence_ids",
  "retrieve_futures",
  "dynamic_config",
  "cancel_future",
  "jwt_auth",
] as const;
