/**
 * Which Tinker SDK generations `serve --tinker` answers, and how it tells clients: its client
 * config lists them (`supported_sdk_versions`: the oldest and newest version it speaks, and
 * `supported_features`: what it implements, by the names of tinker-versions.ts), and a session of
 * a version outside them is told so in the `create_session` answer (a version too old gets an
 * `error_message`, which the SDK logs and this project's client fails on; one newer than the newest
 * a `warning_message`). The version a session reports decides what its samples get (their
 * per-sequence ids from 0.25; their completions logged for `retrieve_futures` from 0.31, so a
 * client that never polls leaves no log to grow).
 */
import {
  FEATURE_NAMES,
  NEWEST_SDK,
  OLDEST_SDK,
  versionAtLeast,
  wireFeatures,
} from "../../engine/remote/tinker-versions.js";

/** A reported sdk_version: x.y.z, or undefined for anything else (the version is then not known). */
export function reportedSdk(raw: unknown): string | undefined {
  return typeof raw === "string" && /^\d+\.\d+\.\d+$/.test(raw) ? raw : undefined;
}

/** The messages of a create_session answer to a client of version `sdk`. */
export function sessionMessages(sdk: string | undefined): Record<string, string> {
  if (sdk === undefined) return {};
  if (!versionAtLeast(sdk, OLDEST_SDK))
    return {
      error_message: `serve --tinker speaks Tinker SDK ${OLDEST_SDK} to ${NEWEST_SDK}; SDK ${sdk} is older: use ${OLDEST_SDK} or later`,
    };
  if (sdk !== NEWEST_SDK && versionAtLeast(sdk, NEWEST_SDK))
    return {
      warning_message: `serve --tinker speaks Tinker SDK ${OLDEST_SDK} to ${NEWEST_SDK}; SDK ${sdk} is newer and is answered as ${NEWEST_SDK}`,
    };
  return {};
}

/** Whether a session of version `sdk` polls its samples' completions per sampling session (so they are logged for it). */
export function pollsSessions(sdk: string | undefined): boolean {
  return sdk !== undefined && wireFeatures(sdk).sessionPolling;
}

/** Whether a session of version `sdk` gets per-sequence sample ids. */
export function sendsSampleIds(sdk: string | undefined): boolean {
  return sdk !== undefined && wireFeatures(sdk).sampleIds !== "none";
}

/** The client-config fields that say what this server speaks. */
export function supportFields(o: { compress: boolean; jwt: boolean }): Record<string, unknown> {
  return {
    supported_sdk_versions: { oldest: OLDEST_SDK, newest: NEWEST_SDK },
    supported_features: FEATURE_NAMES.filter((f) => (f === "zstd" ? o.compress : f === "jwt_auth" ? o.jwt : true)),
  };
}
