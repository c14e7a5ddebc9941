/**
 * Finite checks on weights: a model's or adapter's tensors must hold no NaN or ±Infinity. The
 * safetensors reader passes any bits through (a file is read and written back bit for bit); what
 * loads weights to run them checks each tensor it keeps with these.
 */
import { ModelFormatError } from "../util/errors.js";
import { toFloat32, type HostTensor, type RawTensor } from "./safetensors.js";

/**
 * The index of the first NaN or ±Infinity in a tensor's data, or -1: bit tests on the stored
 * words (exponent all ones), one pass and no allocation, so a model's weights are checked as fast
 * as they are read. 16-bit data is read as its dtype says (BF16 unless F16).
 */
export function firstNonFinite(t: HostTensor | RawTensor): number {
  const data = t.data;
  if (data instanceof Float32Array) {
    const bits = new Uint32Array(data.buffer, data.byteOffset, data.length);
    for (let i = 0; i < bits.length; i++) if ((bits[i] & 0x7f800000) === 0x7f800000) return i;
    return -1;
  }
  const mask = (t as RawTensor).dtype === "F16" ? 0x7c00 : 0x7f80;
  for (let i = 0; i < data.length; i++) if ((data[i] & mask) === mask) return i;
  return -1;
}

/** "NaN at element 3 of 64" for element i of a tensor (firstNonFinite's answer). */
export function describeNonFinite(t: HostTensor | RawTensor, i: number): string {
  const x =
    t.data instanceof Float32Array ? t.data[i] : toFloat32({ ...(t as RawTensor), data: t.data.subarray(i, i + 1) })[0];
  const what = Number.isNaN(x) ? "NaN" : x > 0 ? "+Infinity" : "-Infinity";
  return `${what} at element ${i} of ${t.data.length}`;
}

/**
 * Refuses a tensor that holds NaN or ±Infinity: a ModelFormatError naming `file` and the tensor
 * ("model.safetensors (model.norm.weight): holds NaN at element 3 of 64; ..."). What loads a model
 * or adapters to run checks each tensor it keeps with this; the reader itself passes any bits
 * through (a file is read and written back bit for bit).
 */
export function checkFiniteTensor(file: string, name: string, t: HostTensor | RawTensor): void {
  const i = firstNonFinite(t);
  if (i < 0) return;
  throw new ModelFormatError(
    file,
    name,
    `holds ${describeNonFinite(t, i)}; a model's weights must be finite numbers`,
    "the checkpoint is damaged or its training diverged; use an earlier checkpoint",
  );
}

/** checkFiniteTensor on every tensor of a map. */
export function checkFiniteTensors(file: string, tensors: Map<string, HostTensor | RawTensor>): void {
  for (const [name, t] of tensors) checkFiniteTensor(file, name, t);
}
