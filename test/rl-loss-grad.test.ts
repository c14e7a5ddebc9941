/**
 * The per-token loss gradients of src/rl (policy-loss.ts tokenLossGrad, kl.ts klGrad), which the
 * native engine's backward starts from: by hand on each branch (inside and outside every clip),
 * and against central differences of the loss values (policyTokenLoss + coef·klValue) away from
 * the kinks, for every loss type and KL form.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { klGrad, klValue } from "../src/rl/kl.js";
import { policyTokenLoss, resolvedLoss, tokenLossGrad } from "../src/rl/policy-loss.js";
import type { KlForm, LossSpec } from "../src/engine/types.js";
import { Rng } from "../src/util/rng.js";

const L = Math.log;
const near = (a: number, b: number, tol = 1e-12) =>
  assert.ok(Math.abs(a - b) <= tol * Math.max(1, Math.abs(b)), `${a} vs ${b}`);

test("by hand: d loss / d p on every branch", () => {
  const ppo = resolvedLoss({ type: "ppo" }); // clip 0.2 / 0.2, dual clip 3
  // inside the trust region: l = -r·A, dl/dp = -r·A
  near(tokenLossGrad(ppo, L(1.1), 0, 2, 0).grad, -2.2);
  // A > 0, r = 1.5 clipped at 1.2: constant, no gradient
  near(tokenLossGrad(ppo, L(1.5), 0, 0.8, 0).grad, 0);
  // A > 0, r = 0.5: unclipped branch, -r·A
  near(tokenLossGrad(ppo, L(0.5), 0, 1.2, 0).grad, -0.6);
  // A < 0, r = 2: unclipped 2 (below the dual cap 3): -r·A = 2
  near(tokenLossGrad(ppo, L(2), 0, -1, 0).grad, 2);
  // A < 0, r = 5: the dual cap -A·3 binds: no gradient
  near(tokenLossGrad(ppo, L(5), 0, -0.7, 0).grad, 0);
  // A < 0, r = 0.6: clipped at 0.8, constant
  near(tokenLossGrad(ppo, L(0.6), 0, -1.5, 0).grad, 0);
  near(tokenLossGrad(resolvedLoss({ type: "importance_sampling" }), -1, -1 - L(3), 0.5, 0).grad, -1.5);
  near(tokenLossGrad(resolvedLoss({ type: "cross_entropy" }), -2.5, 0, 0, 0).grad, -1);
  // CISPO: -sg(clip(r))·A, r = 5 clipped to 4
  near(tokenLossGrad(resolvedLoss({ type: "cispo" }), L(5), 0, 1, 0).grad, -4);
  near(tokenLossGrad(resolvedLoss({ type: "cispo" }), L(0.5), 0, 2, 0).grad, -1);
  // DRO: -(A - β·(p - q)) with p = -1, q = -1.5, A = 2, β = 0.05
  near(tokenLossGrad(resolvedLoss({ type: "dro" }), -1, -1.5, 2, 0).grad, -(2 - 0.05 * 0.5));
  // KL forms at p = -1, ref = -1.5: k1' = 1, k2' = p - ref = 0.5, k3' = 1 - exp(ref - p)
  near(klGrad(-1, -1.5, "k1"), 1);
  near(klGrad(-1, -1.5, "k2"), 0.5);
  near(klGrad(-1, -1.5, "k3"), 1 - Math.exp(-0.5));
  // k3 past its clamp (exp(d) - d - 1 > 10): constant
  near(klGrad(-20, -5, "k3"), 0);
  // the KL term enters with its coefficient
  const withKl = resolvedLoss({ type: "cross_entropy", kl: { coef: 0.1, form: "k2" } });
  near(tokenLossGrad(withKl, -1, 0, 0, -1.5).grad, -1 + 0.1 * 0.5);
  near(tokenLossGrad(withKl, -1, 0, 0, -1.5).loss, 1 + 0.1 * 0.5 * 0.25);
});

test("d loss / d p equals central differences of the loss, for every loss type and KL form", () => {
  const rng = new Rng(12);
  const specs: LossSpec[] = [
    { type: "cross_entropy" },
    { type: "importance_sampling" },
    { type: "ppo" },
    { type: "ppo", dualClip: 0, clipLow: 0.1, clipHigh: 0.3 },
    { type: "cispo" },
    { type: "dro", beta: 0.2 },
  ];
  const forms: (KlForm | undefined)[] = [undefined, "k1", "k2", "k3"];
  let checked = 0;
  for (const spec of specs)
    for (const form of forms) {
      const loss = resolvedLoss(form ? { ...spec, kl: { coef: 0.3, form } } : spec);
      for (let i = 0; i < 200; i++) {
        const q = -3 * rng.next(),
          p = q + 1.5 * rng.normal(),
          a = 2 * rng.normal(),
          ref = p + rng.normal();
        const f = (x: number) =>
          (loss.type === "cispo"
            ? -Math.max(1 - loss.clipLow, Math.min(1 + loss.clipHigh, Math.exp(p - q))) * x * a // the weight is a constant
            : policyTokenLoss(loss, x, q, a).loss) + (loss.kl ? loss.kl.coef * klValue(x, ref, loss.kl.form) : 0);
        const h = 1e-6;
        // skip points within h of a kink (a clip boundary), where the difference straddles two branches
        const slope1 = (f(p) - f(p - h)) / h,
          slope2 = (f(p + h) - f(p)) / h;
        if (Math.abs(slope1 - slope2) > 1e-3 * Math.max(1, Math.abs(slope1))) continue;
        const fd = (f(p + h) - f(p - h)) / (2 * h);
        const { grad, loss: l } = tokenLossGrad(loss, p, q, a, ref);
        near(l, f(p), 1e-12);
        assert.ok(
          Math.abs(grad - fd) <= 1e-5 * Math.max(1, Math.abs(fd)),
          `${JSON.stringify(spec)} ${form}: ${grad} vs ${fd}`,
        );
        checked++;
      }
    }
  assert.ok(checked > 4000, `only ${checked} points checked`);
});
