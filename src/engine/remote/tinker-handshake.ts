/**
 * The Tinker client's handshake answers, read strictly:
 *  - `client/config`: the flags this client acts on (zstd bodies, chunk sizes, JWT exchange,
 *    completions polled per session), and, from `serve --tinker`, the SDK versions the server
 *    speaks (`supported_sdk_versions`): a version outside them fails at once, naming both;
 *  - `create_session`: the session id, and the server's messages to this client version
 *    (`info_message`, `warning_message` logged; `error_message` fails the run with one line naming
 *    the server, as a deprecation past its end would).
 */
import { Answer, isNot } from "./tinker-answer.js";
import { TinkerError } from "./tinker-error.js";
import { versionAtLeast } from "./tinker-versions.js";

export interface ClientFlags {
  compress: boolean;
  maxChunkLen?: number;
  maxChunkBytes?: number;
  /** Exchange the credential for a JWT (`pjwt_auth_enabled`). */
  jwt: boolean;
  /** Sample completions polled per sampling session (`sample_use_retrieve_futures`). */
  retrieveFutures: boolean;
}

/** The versions a server says it speaks, checked against ours; a fault where the field is malformed. */
function checkSupported(flags: Record<string, unknown>, sdkVersion: string, a: Answer): void {
  const raw = flags.supported_sdk_versions;
  if (raw === undefined || raw === null) return;
  const range = a.object(raw, "supported_sdk_versions");
  for (const k of ["oldest", "newest"])
    if (typeof range[k] !== "string" || !/^\d+\.\d+\.\d+$/.test(range[k] as string))
      throw a.fault(`supported_sdk_versions.${k}`, isNot(range[k], "a version x.y.z"));
  const oldest = range.oldest as string,
    newest = range.newest as string;
  if (!versionAtLeast(sdkVersion, oldest) || (sdkVersion !== newest && versionAtLeast(sdkVersion, newest)))
    throw new TinkerError(
      `${a.server}: this server speaks Tinker SDK ${oldest} to ${newest}, not ${sdkVersion} (engine.tinker.sdkVersion)`,
      `set engine.tinker.sdkVersion to a version from ${oldest} to ${newest}`,
    );
}

/** The client config's flags, checked. */
export function readClientFlags(flags: Record<string, unknown>, sdkVersion: string, url: string): ClientFlags {
  const a = new Answer(url, "client/config");
  checkSupported(flags, sdkVersion, a);
  return {
    compress: a.optionalBoolean(flags, "proto_compress_fwdbwd") ?? false,
    maxChunkLen: a.optionalInteger(flags, "fwdbwd_max_chunk_len", 1),
    maxChunkBytes: a.optionalInteger(flags, "fwdbwd_max_chunk_bytes_count", 1),
    jwt: a.optionalBoolean(flags, "pjwt_auth_enabled") ?? false,
    retrieveFutures: a.optionalBoolean(flags, "sample_use_retrieve_futures") ?? false,
  };
}

/** An optional message field: a string, or left out / null. */
function message(o: Record<string, unknown>, key: string, a: Answer): string | undefined {
  const v = o[key];
  if (v === undefined || v === null || v === "") return undefined;
  if (typeof v !== "string") throw a.fault(key, isNot(v, "a message (a string)"));
  return v.replace(/\s+/g, " ").trim().slice(0, 500);
}

/** The create_session answer: its session id, with the server's messages logged, or its error thrown. */
export function readSession(raw: Record<string, unknown>, url: string, log?: (line: string) => void): string {
  const a = new Answer(url, "create_session");
  const id = a.string(raw, "session_id");
  const info = message(raw, "info_message", a),
    warning = message(raw, "warning_message", a),
    error = message(raw, "error_message", a);
  if (info) log?.(`tinker: ${url} says: ${info}`);
  if (warning) log?.(`tinker: warning from ${url}: ${warning}`);
  if (error)
    throw new TinkerError(
      `${url}: create_session: the server refuses this client: ${error}`,
      "the server names what it wants (often another engine.tinker.sdkVersion)",
    );
  return id;
}
