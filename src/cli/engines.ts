/**
 * Engines for the commands: the factory a recipe's `engine` section names (../engine/engines-for.ts,
 * shared with the library's `train`), and a --model directory opened as an engine.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import type { PolicyEngine } from "../engine/factory.js";
import type { LocalEngineOptions } from "../engine/local/local-engine.js";
import { readRemoteState, REMOTE_FILE, TinkerEngine } from "../engine/remote/tinker-engine.js";
import { settings } from "../util/settings.js";

export { enginesFor } from "../engine/engines-for.js";

/**
 * A model directory as an engine, for the commands that take --model: a local Hugging Face
 * directory, or a checkpoint of a remote run (its remote.json names the server, and the run's
 * state is loaded there; TINKER_BASE_URL and TINKER_API_KEY override or complete it).
 */
export async function openModel(dir: string, local: LocalEngineOptions = {}): Promise<PolicyEngine> {
  if (existsSync(join(dir, REMOTE_FILE))) {
    const st = readRemoteState(dir);
    return TinkerEngine.open({
      url: settings().tinkerBaseUrl ?? st.url,
      apiKey: settings().tinkerApiKey,
      ...(settings().tinkerApiKey ? {} : { credentialCommand: settings().tinkerCredentialCmd }),
      baseModel: st.baseModel,
      ...(st.lora ? { lora: st.lora } : {}),
      sdkVersion: st.sdkVersion ?? "0.25.0",
      tokenizerDir: dir,
      resumeFrom: dir,
    });
  }
  const { LocalEngine } = await import("../engine/local/local-engine.js");
  return LocalEngine.load(dir, local);
}
