/**
 * New weights for an SGLang sampler as whole model directories: after each optimizer step (and once
 * at the start) the learner's weights are written to `weightsDir/vN` and the server is asked to load
 * them (POST /update_weights_from_disk); the last two versions are kept on disk. Samples need no
 * name for them: the server holds one set of weights at a time.
 *
 * The weights directory is the caller's unless it says this push owns it (a temporary directory
 * made with src/util/temp-dirs.ts): then `dispose` removes it, and the process does at exit if
 * nothing did.
 */
import { existsSync, mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { removeTempDir } from "../../util/temp-dirs.js";
import type { RolloutSampler } from "./sampler-client.js";
import type { WeightsPush } from "./split-engine.js";

export class FullWeightsPush implements WeightsPush {
  private version = 0;

  constructor(
    /** Writes the learner's weights as a model directory. */
    private readonly save: (dir: string) => Promise<void>,
    private readonly sampler: RolloutSampler,
    private readonly weightsDir: string,
    /** Whether `weightsDir` is a temporary directory of ours, removed by `dispose`. */
    private readonly ownsWeightsDir = false,
  ) {
    mkdirSync(weightsDir, { recursive: true });
  }

  async publish(): Promise<void> {
    const v = ++this.version;
    const dir = join(this.weightsDir, `v${v}`);
    await this.save(dir);
    await this.sampler.reload(dir, v);
    const old = join(this.weightsDir, `v${v - 2}`);
    if (v > 2 && existsSync(old)) rmSync(old, { recursive: true, force: true });
  }

  use<T>(sample: (adapter?: string) => Promise<T>): Promise<T> {
    return sample();
  }

  async dispose(): Promise<void> {
    if (this.ownsWeightsDir) removeTempDir(this.weightsDir);
  }
}
