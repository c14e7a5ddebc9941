/** Data loaders: JSONL, Agent-R1 rows (parquet and JSONL), HotpotQA, GSM8K, BeIR corpora. */
export type { SearchDocument } from "./documents.js";
export { BadRow, collectRows, type ReadOptions, type ReadResult } from "./read-result.js";
export { readJsonl, writeJsonl, parseJsonl, readTextFile } from "./jsonl.js";
export { taskRowSchema, chatMessageSchema, checkTaskRow } from "./row-schema.js";
export { readTaskRowsJsonl, writeTaskRowsJsonl } from "./task-rows-jsonl.js";
export { readTaskRowsParquet, writeTaskRowsParquet } from "./parquet.js";
export { readTaskRowsFile, skippedRowsNote } from "./task-rows-file.js";
export { layoutRows, unlayoutRow, JSON_FIELDS_KEY, type ParquetLayout } from "./parquet-layout.js";
export {
  loadHotpotQa,
  hotpotFromJson,
  hotpotRow,
  HOTPOTQA_DATA_SOURCE,
  type HotpotOptions,
  type HotpotData,
  type HotpotRecord,
} from "./hotpotqa.js";
export { loadGsm8k, gsm8kRow, gsm8kFinalAnswer, GSM8K_DATA_SOURCE, type Gsm8kOptions } from "./gsm8k.js";
export { loadBeirCorpus, beirDocument } from "./beir.js";
