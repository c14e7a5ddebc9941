/**
 * Learning rate at an optimizer step: constant; linear warm-up then constant;
 * or linear warm-up then cosine decay to minLrRatio x lr at the last step.
 */
export interface ScheduleSpec {
  lr: number;
  schedule: "constant" | "warmup" | "cosine";
  warmupSteps: number;
  minLrRatio: number;
}

/** `step` counts from 0; `totalSteps` is the number of optimizer steps in the run. */
export function learningRate(s: ScheduleSpec, step: number, totalSteps: number): number {
  if (s.schedule === "constant") return s.lr;
  if (step < s.warmupSteps) return (s.lr * (step + 1)) / s.warmupSteps;
  if (s.schedule === "warmup") return s.lr;
  const span = Math.max(1, totalSteps - s.warmupSteps - 1);
  const progress = Math.min(1, (step - s.warmupSteps) / span);
  const min = s.lr * s.minLrRatio;
  return min + (s.lr - min) * 0.5 * (1 + Math.cos(Math.PI * progress));
}
