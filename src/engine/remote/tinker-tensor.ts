/**
 * Tensors of the Tinker wire, read strictly on both sides (the client reading results, `serve
 * --tinker` reading requests), as the SDK reads them:
 *  - a dtype is one the protocol has (float32, int64, int32, bfloat16); unspecified or unknown is an
 *    error, never read as float32. int32 widens to int64 and bfloat16 to float32, as in the SDK;
 *  - a byte blob holds a whole number of values;
 *  - a batched tensor (one field of an ArrayRecord) has exactly num_datums + 1 int64 byte offsets,
 *    from 0, never going back, each on a value, the last at the end of the data: every datum gets
 *    its own slice, none "the rest of the buffer"; its trailing_shape divides every datum's values;
 *  - a shape, where given, holds exactly the values there are; a sparse (CSR) tensor is 2-D, with
 *    row pointers from 0 to the number of values and column indices inside its row, increasing,
 *    and is made dense with 0 in the cells it leaves out.
 * Each violation is the `fault` of the side reading it, naming the field.
 */
import type { Fault } from "./tinker-error.js";
import { isNot } from "./tinker-answer.js";
import { DTYPE, readFloat32, readInt32, readInt64 } from "./tinker-proto.js";

/** A tensor as both sides work with it: values in order, the public dtype, and its shape. */
export interface WireTensor {
  data: number[];
  dtype: "float32" | "int64";
  shape?: number[];
}

interface DtypeInfo {
  name: string;
  /** Bytes per value. */
  width: number;
  /** What it reads as on the public wire. */
  as: WireTensor["dtype"];
  read(bytes: Uint8Array): number[];
}

const DTYPES = new Map<number, DtypeInfo>([
  [DTYPE.float32, { name: "float32", width: 4, as: "float32", read: (b) => readFloat32(b, "float32") }],
  [DTYPE.int64, { name: "int64", width: 8, as: "int64", read: (b) => readInt64(b, "int64") }],
  [DTYPE.int32, { name: "int32", width: 4, as: "int64", read: (b) => readInt32(b, "int32") }],
  [DTYPE.bfloat16, { name: "bfloat16", width: 2, as: "float32", read: bf16ToFloat }],
]);

const KNOWN = "float32, int64, int32 or bfloat16";

/** The dtype a protobuf tensor declares, or a fault: unspecified (0) and unknown codes are refused. */
export function protoDtype(code: unknown, field: string, fault: Fault): DtypeInfo {
  const info = typeof code === "number" ? DTYPES.get(code) : undefined;
  if (info) return info;
  if (code === DTYPE.unspecified || code === undefined) throw fault(field, `is unspecified; it must be ${KNOWN}`);
  throw fault(field, `is ${String(code)}, not a dtype of the protocol (${KNOWN})`);
}

/** The values of a byte blob of one dtype; a blob that is not a whole number of values is a fault. */
export function blobValues(bytes: unknown, info: DtypeInfo, field: string, fault: Fault): number[] {
  if (!(bytes instanceof Uint8Array)) throw fault(field, "is missing");
  if (bytes.byteLength % info.width !== 0)
    throw fault(field, `holds ${bytes.byteLength} bytes, not a whole number of ${info.width}-byte ${info.name} values`);
  return info.read(bytes);
}

/** A blob of a dtype the field always has (token ids int32, logprobs float32, offsets int64). */
export function typedBlob(dtype: "int32" | "int64" | "float32", bytes: unknown, field: string, fault: Fault): number[] {
  return blobValues(bytes, DTYPES.get(DTYPE[dtype])!, field, fault);
}

const int64s = (bytes: unknown, field: string, fault: Fault) => typedBlob("int64", bytes, field, fault);

/** A list of dimensions: safe integers >= `min`. */
function dims(raw: unknown, field: string, fault: Fault, min = 0): number[] {
  if (!Array.isArray(raw)) throw fault(field, isNot(raw, "a list of dimensions"));
  raw.forEach((d, i) => {
    if (!Number.isSafeInteger(d) || (d as number) < min)
      throw fault(`${field}[${i}]`, isNot(d, `a dimension (an integer >= ${min})`));
  });
  return raw as number[];
}

const product = (xs: number[]) => xs.reduce((p, x) => p * x, 1);

/** The shape of `count` values: as given (it must hold exactly that many), else [count]. An empty list is not given. */
export function shapeOf(raw: unknown, count: number, field: string, fault: Fault): number[] {
  if (raw === undefined || raw === null || (Array.isArray(raw) && raw.length === 0)) return [count];
  const shape = dims(raw, field, fault);
  if (product(shape) !== count)
    throw fault(field, `is [${shape.join(", ")}], which holds ${product(shape)} values, but the data holds ${count}`);
  return shape;
}

/**
 * One field of an ArrayRecord (a BatchedTensor) split into its `n` datums' values, each with the
 * trailing dimensions the field declares.
 */
export function splitBatched(
  bt: Record<string, unknown>,
  n: number,
  field: string,
  fault: Fault,
): { rows: number[][]; trailing: number[]; dtype: WireTensor["dtype"] } {
  const info = protoDtype(bt.dtype, `${field}.dtype`, fault);
  const data = bt.data instanceof Uint8Array ? bt.data : new Uint8Array();
  blobValues(data, info, `${field}.data`, fault);
  const off = int64s(bt.offsets ?? new Uint8Array(), `${field}.offsets`, fault);
  if (off.length !== n + 1)
    throw fault(`${field}.offsets`, `holds ${off.length} offsets for ${n} datums (num_datums); it must hold ${n + 1}`);
  if (off[0] !== 0) throw fault(`${field}.offsets[0]`, `is ${off[0]}, not 0`);
  for (let i = 1; i <= n; i++) {
    if (off[i] < off[i - 1])
      throw fault(`${field}.offsets[${i}]`, `is ${off[i]}, below offsets[${i - 1}] (${off[i - 1]})`);
    if (off[i] % info.width !== 0)
      throw fault(`${field}.offsets[${i}]`, `is ${off[i]}, not on a ${info.width}-byte ${info.name} value`);
  }
  if (off[n] !== data.byteLength)
    throw fault(`${field}.offsets[${n}]`, `is ${off[n]}, but the data holds ${data.byteLength} bytes`);
  const trailing = dims(bt.trailing_shape ?? [], `${field}.trailing_shape`, fault, 1);
  const per = product(trailing);
  const rows = Array.from({ length: n }, (_, i) => info.read(data.subarray(off[i], off[i + 1])));
  rows.forEach((row, i) => {
    if (row.length % per !== 0)
      throw fault(
        `${field}.trailing_shape`,
        `is [${trailing.join(", ")}] (${per} values a row), which does not divide datum ${i}'s ${row.length} values`,
      );
  });
  return { rows, trailing, dtype: info.as };
}

/**
 * A sparse (CSR) 2-D tensor made dense: `values` at the listed cells, 0 elsewhere. Row pointers
 * go from 0 to the number of values without going back; column indices are inside the row width
 * and increase within a row.
 */
export function csrDense(
  csr: { values: number[]; crow: number[]; col: number[]; shape: number[] | undefined },
  names: { crow: string; col: string; shape: string },
  fault: Fault,
): number[] {
  const { values, crow, col, shape } = csr;
  if (!shape || shape.length !== 2)
    throw fault(names.shape, `is ${shape ? `[${shape.join(", ")}]` : "missing"}; a sparse tensor needs a 2-D shape`);
  const [rows, cols] = shape;
  if (crow.length !== rows + 1)
    throw fault(names.crow, `holds ${crow.length} row pointers for ${rows} rows; it must hold ${rows + 1}`);
  if (col.length !== values.length) throw fault(names.col, `holds ${col.length} indices for ${values.length} values`);
  if (crow[0] !== 0) throw fault(`${names.crow}[0]`, `is ${crow[0]}, not 0`);
  if (crow[rows] !== values.length)
    throw fault(`${names.crow}[${rows}]`, `is ${crow[rows]}, but there are ${values.length} values`);
  const dense = new Array<number>(rows * cols).fill(0);
  for (let r = 0; r < rows; r++) {
    if (crow[r + 1] < crow[r])
      throw fault(`${names.crow}[${r + 1}]`, `is ${crow[r + 1]}, below the row before it (${crow[r]})`);
    for (let k = crow[r]; k < crow[r + 1]; k++) {
      const c = col[k];
      if (c < 0 || c >= cols) throw fault(`${names.col}[${k}]`, `is ${c}, outside the ${cols} columns`);
      if (k > crow[r] && c <= col[k - 1])
        throw fault(`${names.col}[${k}]`, `is ${c}, not after the column before it in row ${r} (${col[k - 1]})`);
      dense[r * cols + c] = values[k];
    }
  }
  return dense;
}

/** A protobuf Tensor (dense or sparse CSR) with its dtype and shape checked. */
export function protoTensor(t: Record<string, unknown>, field: string, fault: Fault): Required<WireTensor> {
  const info = protoDtype(t.dtype, `${field}.dtype`, fault);
  const given = Array.isArray(t.shape) && t.shape.length > 0 ? dims(t.shape, `${field}.shape`, fault) : undefined;
  const sparse = t.sparse_csr as Record<string, unknown> | undefined;
  if (sparse) {
    const at = `${field}.sparse_csr`;
    const csr = {
      values: blobValues(sparse.values ?? new Uint8Array(), info, `${at}.values`, fault),
      crow: int64s(sparse.crow_indices ?? new Uint8Array(), `${at}.crow_indices`, fault),
      col: int64s(sparse.col_indices ?? new Uint8Array(), `${at}.col_indices`, fault),
      shape: given,
    };
    const names = { crow: `${at}.crow_indices`, col: `${at}.col_indices`, shape: `${field}.shape` };
    return { data: csrDense(csr, names, fault), dtype: info.as, shape: given! };
  }
  if (!(t.dense instanceof Uint8Array)) throw fault(field, "holds neither dense nor sparse_csr data");
  const data = blobValues(t.dense, info, `${field}.dense`, fault);
  return { data, dtype: info.as, shape: shapeOf(given, data.length, `${field}.shape`, fault) };
}

/** A list of numbers (integers for int64). */
function jsonNumbers(raw: unknown, integers: boolean, field: string, fault: Fault): number[] {
  if (!Array.isArray(raw)) throw fault(field, isNot(raw, "a list of numbers"));
  raw.forEach((x, i) => {
    if (typeof x !== "number") throw fault(`${field}[${i}]`, isNot(x, "a number"));
    if (integers && !Number.isSafeInteger(x)) throw fault(`${field}[${i}]`, `is ${x}, not an integer`);
  });
  return raw as number[];
}

/** A JSON TensorData (`{data, dtype, shape?, sparse_crow_indices?, sparse_col_indices?}`) checked. */
export function jsonTensor(raw: unknown, field: string, fault: Fault): Required<WireTensor> {
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) throw fault(field, "is not a TensorData object");
  const t = raw as Record<string, unknown>;
  if (t.dtype !== "float32" && t.dtype !== "int64")
    throw fault(`${field}.dtype`, isNot(t.dtype, '"float32" or "int64"'));
  const values = jsonNumbers(t.data, t.dtype === "int64", `${field}.data`, fault);
  const crow = t.sparse_crow_indices,
    col = t.sparse_col_indices;
  if ((crow === undefined || crow === null) !== (col === undefined || col === null))
    throw fault(field, "gives only one of sparse_crow_indices and sparse_col_indices; a sparse tensor needs both");
  if (crow !== undefined && crow !== null) {
    const shape = t.shape === undefined || t.shape === null ? undefined : dims(t.shape, `${field}.shape`, fault);
    const names = { crow: `${field}.sparse_crow_indices`, col: `${field}.sparse_col_indices`, shape: `${field}.shape` };
    const csr = {
      values,
      crow: jsonNumbers(crow, true, names.crow, fault),
      col: jsonNumbers(col, true, names.col, fault),
      shape,
    };
    return { data: csrDense(csr, names, fault), dtype: t.dtype, shape: shape! };
  }
  return { data: values, dtype: t.dtype, shape: shapeOf(t.shape, values.length, `${field}.shape`, fault) };
}

function bf16ToFloat(bytes: Uint8Array): number[] {
  const v = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const out = new DataView(new ArrayBuffer(4));
  return Array.from({ length: bytes.byteLength / 2 }, (_, i) => {
    out.setUint32(0, v.getUint16(i * 2, true) << 16, true);
    return out.getFloat32(0, true);
  });
}
