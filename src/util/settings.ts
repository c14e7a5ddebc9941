/**
 * The AGENT_R1_* environment variables, read and checked in this one place. Code below the CLI
 * takes its options as arguments; where an option is unset it falls back to these settings (an
 * engine in a worker thread, a test that runs the CLI in a child process). A malformed value is
 * an InputError naming the variable. Read afresh on each call: the values are few and cheap to
 * parse, and a test may change the environment between calls.
 */
import { InputError } from "./errors.js";

export interface Settings {
  /** AGENT_R1_BACKEND: the compute backend when no option names one (auto, native or tfjs; checked by the engine). */
  backend?: string;
  /** AGENT_R1_WORKERS: engine worker threads when no option says (0 runs in the calling thread). */
  workers?: number;
  /** AGENT_R1_BLAS: the native backend's matrix products when no option names them (auto, own or system; checked by the engine). */
  blas?: string;
  /** AGENT_R1_BLAS_THREADS: BLAS threads per matrix product on the native backend. */
  blasThreads?: number;
  /** AGENT_R1_NATIVE_DISABLE: any value but "0" makes the native addon unavailable (to test the fallback). */
  nativeDisabled: boolean;
  /** AGENT_R1_DEBUG: the CLI prints the stack of an error after its one line. */
  debug: boolean;
  /** AGENT_R1_API_KEY: the key `serve` requires when no --api-key is given. */
  apiKey?: string;
  /** TINKER_API_KEY: sent as X-API-Key to a Tinker-protocol server (the SDK's variable). */
  tinkerApiKey?: string;
  /** TINKER_BASE_URL: the Tinker server when engine.tinker.url is unset (the SDK's variable). */
  tinkerBaseUrl?: string;
  /** TINKER_CREDENTIAL_CMD: a command printing the Tinker credential when TINKER_API_KEY is unset (the SDK's variable). */
  tinkerCredentialCmd?: string;
  /** AGENT_R1_SAMPLER_API_KEY: the Bearer key of an engine.sampler server. */
  samplerApiKey?: string;
  /** AGENT_R1_DASHBOARD_KEY: the key `dashboard` requires when no --api-key is given. */
  dashboardKey?: string;
}

type Env = Record<string, string | undefined>;

function integer(env: Env, name: string, min: number, max = Number.MAX_SAFE_INTEGER): number | undefined {
  const raw = env[name];
  if (raw === undefined || raw === "") return undefined;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min || n > max) {
    throw new InputError(
      `${name} must be an integer ${max === Number.MAX_SAFE_INTEGER ? `>= ${min}` : `in [${min}, ${max}]`}, got '${raw}'`,
    );
  }
  return n;
}

const flag = (env: Env, name: string) => Boolean(env[name]) && env[name] !== "0";

/** AGENT_R1_NATIVE_DISABLE alone: asked on every use of the addon (a decode step), so it reads one variable, not all. */
export const nativeDisabledSetting = (env: Env = process.env): boolean => flag(env, "AGENT_R1_NATIVE_DISABLE");

export function settings(env: Env = process.env): Settings {
  return {
    backend: env.AGENT_R1_BACKEND || undefined,
    workers: integer(env, "AGENT_R1_WORKERS", 0),
    blas: env.AGENT_R1_BLAS || undefined,
    blasThreads: integer(env, "AGENT_R1_BLAS_THREADS", 1),
    nativeDisabled: nativeDisabledSetting(env),
    debug: flag(env, "AGENT_R1_DEBUG"),
    apiKey: env.AGENT_R1_API_KEY || undefined,
    tinkerApiKey: env.TINKER_API_KEY || undefined,
    tinkerBaseUrl: env.TINKER_BASE_URL || undefined,
    tinkerCredentialCmd: env.TINKER_CREDENTIAL_CMD || undefined,
    samplerApiKey: env.AGENT_R1_SAMPLER_API_KEY || undefined,
    dashboardKey: env.AGENT_R1_DASHBOARD_KEY || undefined,
  };
}

/** The variables, for the reference (docs/reference.md). */
export const SETTINGS_DOC: [string, string][] = [
  [
    "AGENT_R1_BACKEND",
    "compute backend when neither `--backend` nor `engine.backend` names one: `auto` (default), `native`, `tfjs`",
  ],
  [
    "AGENT_R1_WORKERS",
    "engine worker threads when neither the code nor `engine.workers` says; 0 runs the engine in the calling thread",
  ],
  [
    "AGENT_R1_BLAS",
    "the native backend's matrix products when `engine.blas` does not name them: `auto` (default), `own`, `system`",
  ],
  ["AGENT_R1_BLAS_THREADS", "BLAS threads per matrix product on the native backend (default: cores / replicas)"],
  ["AGENT_R1_NATIVE_DISABLE", "any value but `0` makes the native addon unavailable (tests the fallback)"],
  ["AGENT_R1_DEBUG", "the CLI prints the stack trace after an error's one line"],
  ["AGENT_R1_API_KEY", "the key `agent-r1 serve` requires when no `--api-key` is given"],
  [
    "TINKER_API_KEY",
    "the API key sent to a Tinker-protocol server (`engine.kind: tinker`), as the Tinker SDK reads it",
  ],
  ["TINKER_BASE_URL", "the Tinker-protocol server when `engine.tinker.url` is unset, as the Tinker SDK reads it"],
  [
    "TINKER_CREDENTIAL_CMD",
    "a shell command printing the credential for a Tinker-protocol server, when neither `engine.tinker.credentialCommand` nor `TINKER_API_KEY` is set, as the Tinker SDK reads it",
  ],
  ["AGENT_R1_SAMPLER_API_KEY", "the Bearer key sent to an `engine.sampler` inference server"],
  ["AGENT_R1_DASHBOARD_KEY", "the key `agent-r1 dashboard` requires when no `--api-key` is given"],
];
