/** updatePolicy's mini-batches: a trajectory split into several datums (one `sequence`) is never cut across two. */
import { test } from "node:test";
import assert from "node:assert/strict";
import type { Datum, Engine, ForwardBackwardResult } from "../src/engine/types.js";
import { parseConfig } from "../src/train/load-config.js";
import { lossSpec, updatePolicy } from "../src/train/update.js";
import { Rng } from "../src/util/rng.js";

/** Records the datums of each forwardBackward call; everything else is a no-op. */
function recordingEngine(calls: Datum[][]): Engine {
  const never = () => Promise.reject(new Error("not used"));
  return {
    sample: never,
    computeLogprobs: never,
    save: never,
    load: never,
    forwardBackward: async (datums): Promise<ForwardBackwardResult> => {
      calls.push(datums);
      return { logprobs: datums.map((d) => d.tokens.map(() => 0)), metrics: { loss: 0, tokens: 0, entropy: 0 } };
    },
    optimStep: async () => ({ gradNorm: 0, skipped: false, step: 0 }),
  };
}

const datum = (id: number, sequence?: number): Datum => ({
  tokens: [id],
  targetTokens: [id],
  weights: [1],
  advantages: [1],
  logprobs: [0],
  sequence,
});

test("mini-batches take whole sequences; each datum is trained once per epoch", async () => {
  // Sequences 1 and 3 are split trajectories (two and three datums); 0, 2 and 4 are single datums.
  const datums = [
    datum(0, 0),
    datum(1, 1),
    datum(2, 1),
    datum(3, 2),
    datum(4, 3),
    datum(5, 3),
    datum(6, 3),
    datum(7, 4),
  ];
  for (const miniBatches of [2, 3, 5]) {
    for (const seed of [0, 1, 2]) {
      const calls: Datum[][] = [];
      const cfg = parseConfig({ train: { miniBatches, ppoEpochs: 2 } });
      await updatePolicy(recordingEngine(calls), datums, {
        spec: lossSpec(cfg),
        optim: cfg.optim,
        schedule: { step: 0, totalSteps: 10 },
        epochs: cfg.train.ppoEpochs,
        miniBatches: cfg.train.miniBatches,
        rng: new Rng(seed, 7),
      });
      assert.equal(calls.length, 2 * miniBatches);
      for (const call of calls) {
        for (const d of call)
          assert.equal(
            call.filter((x) => x.sequence === d.sequence).length,
            datums.filter((x) => x.sequence === d.sequence).length,
            `sequence ${d.sequence} cut`,
          );
      }
      for (const epoch of [calls.slice(0, miniBatches), calls.slice(miniBatches)]) {
        assert.deepEqual(
          epoch
            .flat()
            .map((d) => d.tokens[0])
            .sort(),
          [0, 1, 2, 3, 4, 5, 6, 7],
        );
      }
    }
  }
});
