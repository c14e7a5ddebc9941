/**
 * Per-sequence sample ids (SDK 0.25 on): the server fixes each sequence's id when it takes an
 * `asample`, and its acknowledgement carries them (`sample_sequence_ids`, one per sequence asked
 * for); the result does not repeat them in protobuf, so they go to the sequences by position, as
 * the SDK does. A JSON result that names its sequences (`sequence_id`) is matched by name instead:
 * each must be one of the acknowledged ids, once, and the sequences are put in the
 * acknowledgement's order. A sample sent again (after a 410) is a new submission: the ids of the
 * acknowledgement whose result came back are the ones used.
 *
 * From SDK 0.27 the ids are required; from 0.25 they are checked when sent; before, not read.
 */
import { isNot, type Answer } from "./tinker-answer.js";
import type { SampleResponse } from "./tinker-codec.js";
import type { WireFeatures } from "./tinker-versions.js";

/** The acknowledgement's ids for `n` sequences, checked (n distinct non-empty strings), or undefined where there are none to read. */
export function readSampleIds(
  ack: Record<string, unknown>,
  n: number,
  mode: WireFeatures["sampleIds"],
  a: Answer,
): string[] | undefined {
  const raw = ack.sample_sequence_ids;
  if (mode === "none") return undefined;
  if (raw === undefined || raw === null) {
    if (mode === "required")
      throw a.fault(
        "sample_sequence_ids",
        "is missing; from SDK 0.27 an asample acknowledgement carries one id per sequence",
      );
    return undefined;
  }
  if (!Array.isArray(raw)) throw a.fault("sample_sequence_ids", isNot(raw, "a list of ids"));
  if (raw.length !== n)
    throw a.fault("sample_sequence_ids", `holds ${raw.length} ids; ${n} sequences were asked for (num_samples)`);
  const seen = new Set<string>();
  raw.forEach((id, i) => {
    if (typeof id !== "string" || id === "")
      throw a.fault(`sample_sequence_ids[${i}]`, isNot(id, "a non-empty string"));
    if (seen.has(id))
      throw a.fault(`sample_sequence_ids[${i}]`, `is ${JSON.stringify(id)} again; each sequence has its own id`);
    seen.add(id);
  });
  return raw as string[];
}

/** The result's sequences with their ids: matched by `sequenceId` where the result names them, else by position. */
export function matchSequences(res: SampleResponse, ids: string[], a: Answer): SampleResponse {
  const seqs = res.sequences;
  if (seqs.length !== ids.length)
    throw a.fault(
      "sequences",
      `holds ${seqs.length} sequences for the ${ids.length} ids of the acknowledgement (sample_sequence_ids)`,
    );
  if (seqs.every((s) => s.sequenceId === undefined))
    return { ...res, sequences: seqs.map((s, i) => ({ ...s, sequenceId: ids[i] })) };
  const byId = new Map<string, (typeof seqs)[number]>();
  seqs.forEach((s, i) => {
    const id = s.sequenceId;
    if (id === undefined || !ids.includes(id))
      throw a.fault(
        `sequences[${i}].sequence_id`,
        `is ${id === undefined ? "missing" : JSON.stringify(id)}, not one of the acknowledged ids (sample_sequence_ids)`,
      );
    if (byId.has(id))
      throw a.fault(`sequences[${i}].sequence_id`, `is ${JSON.stringify(id)} again; each sequence comes once`);
    byId.set(id, s);
  });
  return { ...res, sequences: ids.map((id) => byId.get(id)!) };
}
