/**
 * The protobuf messages of the Tinker wire protocol from SDK 0.25 on (forward_backward requests;
 * SampleResponse and ForwardBackwardOutput results), written from the message definitions the SDK
 * publishes (`tinker_public.proto`: names, field numbers, types) and read with protobufjs.
 *
 * Tensors travel as little-endian byte blobs, not repeated fields: token ids int32, dense tensors
 * float32 or int64, batched tensors with int64 byte offsets (n + 1 of them, starting at 0).
 * Proto3 leaves default values off the wire (seq_id 0, forward_only false, dtype unspecified).
 * Fields a newer SDK adds that this side neither sends nor needs (SDK 0.31's loss_fn_config_v2,
 * which it mirrors into loss_fn_config for older servers, and the datum provenance spans) are
 * skipped when read, as protobuf skips any field it does not know.
 */
import protobuf from "protobufjs";

const SCHEMA = `
syntax = "proto3";
package tinker_public;

enum StopReason {
  STOP_REASON_STOP = 0;
  STOP_REASON_LENGTH = 1;
}

enum DType {
  DTYPE_UNSPECIFIED = 0;
  DTYPE_FLOAT32 = 1;
  DTYPE_INT64 = 2;
  DTYPE_INT32 = 3;
  DTYPE_BFLOAT16 = 4;
}

message SampleResponse {
  repeated SampledSequence sequences = 1;
  optional bytes prompt_logprobs = 2;
  optional TopkPromptLogprobs topk_prompt_logprobs = 3;
  int64 prompt_cache_hit_tokens = 4;
}

message SampledSequence {
  StopReason stop_reason = 1;
  bytes tokens = 2;
  optional bytes logprobs = 3;
}

message TopkPromptLogprobs {
  bytes token_ids = 1;
  bytes logprobs = 2;
  uint32 k = 3;
  uint32 prompt_length = 4;
}

message SparseCsr {
  bytes values = 1;
  bytes crow_indices = 2;
  bytes col_indices = 3;
}

message Tensor {
  oneof encoding {
    bytes dense = 1;
    SparseCsr sparse_csr = 2;
  }
  DType dtype = 3;
  repeated int64 shape = 4;
}

message BatchedTensor {
  bytes data = 1;
  bytes offsets = 2;
  DType dtype = 3;
  repeated int64 trailing_shape = 4;
}

message ArrayRecord {
  string type_tag = 1;
  map<string, BatchedTensor> fields = 2;
  int64 num_datums = 3;
}

message ForwardBackwardOutput {
  string loss_fn_output_type = 1;
  repeated ArrayRecord loss_fn_outputs = 2;
  map<string, double> metrics = 3;
}

message ForwardBackwardRequest {
  string model_id = 1;
  int32 seq_id = 2;
  repeated Datum data = 3;
  string loss_fn = 4;
  map<string, double> loss_fn_config = 5;
  bool forward_only = 6;
}

message Datum {
  repeated Chunk model_input = 1;
  map<string, Tensor> loss_fn_inputs = 2;
}

message Chunk {
  oneof chunk {
    EncodedTextChunk encoded_text = 1;
    ImageChunk image = 2;
  }
}

message EncodedTextChunk {
  bytes tokens = 1;
}

message ImageChunk {
  bytes data = 1;
  string format = 2;
  optional int32 expected_tokens = 3;
}
`;

const root = protobuf.parse(SCHEMA, { keepCase: true }).root;
const type = (name: string) => root.lookupType(`tinker_public.${name}`);

export const ForwardBackwardRequestMsg = type("ForwardBackwardRequest");
export const ForwardBackwardOutputMsg = type("ForwardBackwardOutput");
export const SampleResponseMsg = type("SampleResponse");

export const DTYPE = { unspecified: 0, float32: 1, int64: 2, int32: 3, bfloat16: 4 } as const;

/** Encodes a message object (field names as in the schema) after checking it against the schema. */
export function encodeMessage(msg: protobuf.Type, value: Record<string, unknown>): Uint8Array {
  const err = msg.verify(value);
  if (err) throw new Error(`tinker protobuf ${msg.name}: ${err}`);
  return msg.encode(msg.create(value)).finish();
}

/** Decodes bytes into a plain object (bytes as Uint8Array, int64 as number, enums as numbers). */
export function decodeMessage(msg: protobuf.Type, bytes: Uint8Array): Record<string, unknown> {
  return msg.toObject(msg.decode(bytes), { longs: Number, enums: Number, bytes: Uint8Array, defaults: true }) as Record<
    string,
    unknown
  >;
}

// ---- little-endian blobs ----

export function int32Bytes(values: readonly number[]): Uint8Array {
  const out = new Uint8Array(values.length * 4);
  const view = new DataView(out.buffer);
  values.forEach((v, i) => view.setInt32(i * 4, v, true));
  return out;
}

export function float32Bytes(values: readonly number[]): Uint8Array {
  const out = new Uint8Array(values.length * 4);
  const view = new DataView(out.buffer);
  values.forEach((v, i) => view.setFloat32(i * 4, v, true));
  return out;
}

export function int64Bytes(values: readonly number[]): Uint8Array {
  const out = new Uint8Array(values.length * 8);
  const view = new DataView(out.buffer);
  values.forEach((v, i) => view.setBigInt64(i * 8, BigInt(v), true));
  return out;
}

function viewOf(bytes: Uint8Array, width: number, what: string): DataView {
  if (bytes.byteLength % width !== 0)
    throw new Error(
      `tinker protobuf: ${what} holds ${bytes.byteLength} bytes, not a whole number of ${width}-byte values`,
    );
  return new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

export function readInt32(bytes: Uint8Array, what: string): number[] {
  const v = viewOf(bytes, 4, what);
  return Array.from({ length: bytes.byteLength / 4 }, (_, i) => v.getInt32(i * 4, true));
}

export function readFloat32(bytes: Uint8Array, what: string): number[] {
  const v = viewOf(bytes, 4, what);
  return Array.from({ length: bytes.byteLength / 4 }, (_, i) => v.getFloat32(i * 4, true));
}

export function readInt64(bytes: Uint8Array, what: string): number[] {
  const v = viewOf(bytes, 8, what);
  return Array.from({ length: bytes.byteLength / 8 }, (_, i) => Number(v.getBigInt64(i * 8, true)));
}
