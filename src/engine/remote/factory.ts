/**
 * The `tinker` engine kind: policies and references on a Tinker-protocol server. A model directory
 * here is local only for its tokenizer (model.tokenizer or model.path); a checkpoint of a remote run
 * is a directory with remote.json (see tinker-engine.ts), and opening one continues from it. What
 * the remote side lacks (a critic) is refused with one line saying what to use instead.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import type { EngineFactory } from "../factory.js";
import { InputError } from "../../util/errors.js";
import { readRemoteState, REMOTE_FILE, TinkerEngine, type LoraSettings } from "./tinker-engine.js";

/** The hosted service's URL, the SDK's default. */
export const TINKER_DEFAULT_URL = "https://tinker.thinkingmachines.dev/services/tinker-prod";

export interface TinkerEngineSection {
  url?: string;
  baseModel: string;
  lora: LoraSettings | null;
  sdkVersion: string;
  retries: number;
  /** Seconds to pause while the server refuses for billing (402). */
  billingPauseS?: number;
  /** A shell command that prints the credential (it wins over TINKER_API_KEY). */
  credentialCommand?: string;
}

export interface TinkerConnection {
  /** From TINKER_BASE_URL, when the recipe names no URL. */
  defaultUrl?: string;
  /** From TINKER_API_KEY. */
  apiKey?: string;
  /** From TINKER_CREDENTIAL_CMD: used when there is no API key. */
  credentialCommand?: string;
  log?: (line: string) => void;
}

export function tinkerEngines(section: TinkerEngineSection, conn: TinkerConnection = {}): EngineFactory {
  const url = section.url ?? conn.defaultUrl ?? TINKER_DEFAULT_URL;
  const command = section.credentialCommand ?? (conn.apiKey ? undefined : conn.credentialCommand);
  const base = {
    url,
    ...(command ? { credentialCommand: command } : { apiKey: conn.apiKey }),
    baseModel: section.baseModel,
    ...(section.lora ? { lora: section.lora } : {}),
    sdkVersion: section.sdkVersion,
    maxRetries: section.retries,
    ...(section.billingPauseS !== undefined ? { billingMaxPauseMs: section.billingPauseS * 1000 } : {}),
    log: conn.log,
  };
  return {
    kind: "tinker",
    policy: (dir) =>
      TinkerEngine.open({
        ...base,
        tokenizerDir: dir,
        ...(existsSync(join(dir, REMOTE_FILE)) ? { resumeFrom: dir } : {}),
      }),
    reference: (dir) => TinkerEngine.open({ ...base, tokenizerDir: dir, samplerOnly: true }),
    async critic() {
      throw new InputError(
        "the tinker engine has no critic (Tinker trains policies only)",
        "use a group estimator: algorithm.estimator=grpo, rloo or reinforce++",
      );
    },
    checkSaved(dir) {
      try {
        readRemoteState(dir);
        if (!existsSync(join(dir, "tokenizer.json"))) return `${join(dir, "tokenizer.json")} is missing`;
        return undefined;
      } catch (e) {
        return e instanceof Error ? e.message : String(e);
      }
    },
    async initModel() {
      throw new InputError(
        "model.preset: a tinker engine starts from engine.tinker.baseModel, not a local preset",
        "give model.tokenizer (a directory with the base model's tokenizer)",
      );
    },
  };
}
