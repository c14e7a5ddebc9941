/**
 * The critic for PPO with GAE, as the engine exposes it: a value model on the
 * same replicas as the policy, split across them the same way.
 */
import type { LocalEngine } from "./local-engine.js";
import type { ReplicaApi } from "./replica-api.js";
import { fanOut } from "./routing.js";
import type { AdamParams, Critic, OptimStepResult, ValueDatum } from "../types.js";
import { InputError } from "../../util/errors.js";
import { assertFinite, assertTokens } from "../validate.js";

export class LocalCritic implements Critic {
  constructor(
    private engine: LocalEngine,
    private replicas: ReplicaApi[],
  ) {}

  async values(sequences: number[][]): Promise<number[][]> {
    sequences.forEach((s, i) => assertTokens(s, this.engine.config.vocabSize, `sequence ${i}`));
    const shares = await fanOut(
      sequences,
      sequences.map((s) => s.length),
      this.replicas.length,
      (share, r) => this.replicas[r].criticValues(share),
    );
    return shares.gather((rows) => rows);
  }

  async forwardBackward(datums: ValueDatum[], opts: { clip?: number } = {}) {
    const clip = opts.clip ?? 0;
    datums.forEach((d, i) => {
      assertTokens(d.tokens, this.engine.config.vocabSize, `value datum ${i} tokens`);
      for (const k of ["weights", "returns", "oldValues"] as const)
        if (d[k]) assertFinite(d[k]!, `value datum ${i}: ${k}`);
      for (const k of ["weights", "returns"] as const) {
        if (d[k].length !== d.tokens.length)
          throw new InputError(`value datum ${i}: ${k} has length ${d[k].length}, tokens has ${d.tokens.length}`);
      }
      if (clip > 0 && d.oldValues?.length !== d.tokens.length)
        throw new InputError(`value datum ${i}: oldValues is required (same length as tokens) when clip > 0`);
    });
    const total = datums.reduce((s, d) => s + d.weights.reduce((a, w) => a + w, 0), 0);
    // A training pass: alone on the replicas, as the policy's (local-engine.ts).
    const shares = await this.engine.exclusively(() =>
      fanOut(
        datums,
        datums.map((d) => d.tokens.length),
        this.replicas.length,
        (share, r) => this.replicas[r].criticForwardBackward(share, clip, total),
      ),
    );
    const values = shares.gather((x) => x.values);
    const tokens = shares.sum((x) => x.tokens);
    const clipped = shares.sum((x) => x.clipped);
    const loss = shares.sum((x) => x.lossSum);
    return { values, metrics: { loss, tokens, clipFraction: tokens ? clipped / tokens : 0 } };
  }

  async optimStep(params: AdamParams): Promise<OptimStepResult> {
    return this.engine.stepRole("critic", params);
  }

  async save(dir: string): Promise<void> {
    await this.replicas[0].save("critic", dir, this.engine.sourceDirectory);
  }

  async load(dir: string): Promise<void> {
    await this.engine.exclusively(() => Promise.all(this.replicas.map((r) => r.load("critic", dir))));
  }

  /** Releases the critic's weights on every replica; await it before disposing the engine (workers stop then). */
  async dispose(): Promise<void> {
    await Promise.all(this.replicas.map((r) => r.disposeCritic()));
  }
}
