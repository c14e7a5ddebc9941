/**
 * How the trainer, the warm start and the main job get their engines. They see only these
 * interfaces; an engine kind (`engine.kind` in the recipe: `local` or `tinker`) supplies a factory,
 * built at the edge (the CLI and the library's `train`; from a recipe's `engine` section through
 * ./engines-for.ts), and only that factory constructs their engines.
 */
import type { Tokenizer } from "../model/tokenizer.js";
import type { PresetName } from "../model/config.js";
import type { Critic, Engine } from "./types.js";

/** A policy engine as the training loop drives it: the training API, plus what rollouts and metrics read. */
export interface PolicyEngine extends Engine {
  /** The policy's tokenizer: rollouts render prompts and tokenize observations with it. */
  readonly tokenizer: Tokenizer;
  /** The model's context window and vocabulary (rollouts cap episodes at the window). */
  readonly config: { maxPositionEmbeddings: number; vocabSize: number };
  /** Share of looked-up prompt tokens served from a prefix cache, for the metrics (0 when the engine has none). */
  prefixHitRate?(): Promise<number>;
  /** Writes the policy's LoRA adapters alone in PEFT's layout (a LoRA policy; an inference server loads them). */
  saveAdapter?(dir: string): Promise<void>;
  dispose(): Promise<void>;
}

/** A value model that can be released. */
export interface OwnedCritic extends Critic {
  dispose(): Promise<void>;
}

export interface EngineFactory {
  /** The engine kind, as `engine.kind` names it. */
  readonly kind: string;
  /** The policy, from a model directory (its optimizer state too, when the directory holds one). */
  policy(modelDir: string): Promise<PolicyEngine>;
  /** A frozen copy of a model, for reference logprobs (the KL term). */
  reference(modelDir: string): Promise<PolicyEngine>;
  /** A value model on its own weights, started from the policy's current ones. */
  critic(policy: PolicyEngine): Promise<OwnedCritic>;
  /** Why a directory `policy.save` or `critic.save` wrote is unusable, read back cheaply (resume falls back then); undefined when it looks sound. */
  checkSaved?(dir: string): string | undefined;
  /** Writes a fresh random model of a preset as a model directory (a recipe's `model.preset`). */
  initModel(o: { preset: PresetName; out: string; tokenizer?: string; seed?: number }): Promise<void>;
}
