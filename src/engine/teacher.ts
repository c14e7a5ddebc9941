/**
 * The teacher of on-policy distillation (`algorithm.distill.teacher`, src/train/distill-config.ts),
 * opened as something that scores token sequences the way `Engine.computeLogprobs` does:
 *  - a model directory: the engine factory's frozen copy of it (`reference`: the local engine);
 *  - { kind: tinker, url, model, tokenizer }: a sampler-only Tinker engine (prompt_logprobs);
 *  - { kind: vllm, url, model, tokenizer }: vLLM's /v1/completions with echo
 *    (remote/sampler-client.ts).
 * Before it is opened, the teacher's tokenizer.json must equal the student's
 * (src/model/tokenizer-digest.ts): the teacher scores the student's token ids, which mean the same
 * text only under the same tokenizer.
 */
import { join } from "node:path";
import type { EngineFactory } from "./factory.js";
import { tinkerEngines } from "./remote/factory.js";
import { promptScorer } from "./remote/sampler-client.js";
import { tokenizerDigest } from "../model/tokenizer-digest.js";
import type { TeacherSpec } from "../train/distill-config.js";
import { InputError } from "../util/errors.js";
import { settings } from "../util/settings.js";

const FIELD = "algorithm.distill.teacher";

export interface Teacher {
  /** Per sequence, entry 0 is null and entry i is the teacher's log p(seq[i] | seq[<i]) at temperature 1. */
  computeLogprobs(sequences: number[][]): Promise<(number | null)[][]>;
  /** Where the teacher runs, for logs. */
  describe(): string;
  dispose(): Promise<void>;
}

/** The local directory holding the teacher's tokenizer.json. */
export function teacherTokenizerDir(spec: TeacherSpec): string {
  return typeof spec === "string" ? spec : spec.tokenizer;
}

/** Refuses, in one line, a teacher whose tokenizer.json differs from the student's (in `studentDir`). */
export function checkTeacherTokenizer(spec: TeacherSpec, studentDir: string): void {
  const teacherDir = teacherTokenizerDir(spec);
  const [t, s] = [tokenizerDigest(teacherDir), tokenizerDigest(studentDir)];
  if (t !== s)
    throw new InputError(
      `${FIELD}: the teacher's tokenizer (${join(teacherDir, "tokenizer.json")}, sha256 ${t.slice(0, 12)}) is not the student's (${join(studentDir, "tokenizer.json")}, sha256 ${s.slice(0, 12)}); distillation needs one tokenizer for both`,
    );
}

export interface TeacherConnection {
  /** The run's engine factory: a model-directory teacher is its `reference`. */
  engines: EngineFactory;
  /** A tinker teacher speaks this SDK version and retries this often (default: 0.25.0, 6). */
  tinker?: { sdkVersion: string; retries: number };
  log?: (line: string) => void;
}

export async function openTeacher(spec: TeacherSpec, c: TeacherConnection): Promise<Teacher> {
  if (typeof spec === "string") {
    const engine = await c.engines.reference(spec);
    return {
      computeLogprobs: (seqs) => engine.computeLogprobs(seqs),
      describe: () => `${spec} (${engine.describe?.() ?? c.engines.kind})`,
      dispose: () => engine.dispose(),
    };
  }
  if (spec.kind === "tinker") {
    const section = {
      url: spec.url,
      baseModel: spec.model,
      lora: null,
      sdkVersion: c.tinker?.sdkVersion ?? "0.25.0",
      retries: c.tinker?.retries ?? 6,
    };
    const engine = await tinkerEngines(section, { apiKey: settings().tinkerApiKey, log: c.log }).reference(
      spec.tokenizer,
    );
    return {
      computeLogprobs: (seqs) => engine.computeLogprobs(seqs),
      describe: () => `${spec.model} on the tinker server at ${spec.url}`,
      dispose: () => engine.dispose(),
    };
  }
  const scorer = promptScorer({
    kind: spec.kind,
    url: spec.url,
    model: spec.model,
    apiKey: settings().samplerApiKey,
    urlField: `${FIELD}.url`,
  });
  return {
    computeLogprobs: (seqs) => scorer.computeLogprobs(seqs),
    describe: () => `${spec.model} on ${scorer.describe()}`,
    dispose: async () => undefined,
  };
}
