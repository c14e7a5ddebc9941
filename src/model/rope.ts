/** Rotary embedding frequencies, with Llama 3's low/high-frequency rescaling when configured. */
import type { ModelConfig } from "./config.js";

/** inv_freq[i] = theta^(-2i/hd) for i < hd/2, in float64. */
export function ropeInverseFrequencies(c: Pick<ModelConfig, "headDim" | "ropeTheta" | "ropeScaling">): Float64Array {
  const half = c.headDim / 2;
  const f = new Float64Array(half);
  for (let i = 0; i < half; i++) f[i] = Math.pow(c.ropeTheta, -(2 * i) / c.headDim);
  const s = c.ropeScaling;
  if (!s) return f;
  // Wavelengths longer than the original context at low_freq_factor are slowed by `factor`;
  // those shorter than at high_freq_factor are kept; the band between is interpolated.
  const lowWavelen = s.originalMaxPosition / s.lowFreqFactor;
  const highWavelen = s.originalMaxPosition / s.highFreqFactor;
  for (let i = 0; i < half; i++) {
    const wavelen = (2 * Math.PI) / f[i];
    if (wavelen > lowWavelen) f[i] = f[i] / s.factor;
    else if (wavelen >= highWavelen) {
      const smooth = (s.originalMaxPosition / wavelen - s.lowFreqFactor) / (s.highFreqFactor - s.lowFreqFactor);
      f[i] = (1 - smooth) * (f[i] / s.factor) + smooth * f[i];
    }
  }
  return f;
}
