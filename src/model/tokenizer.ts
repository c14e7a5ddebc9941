/**
 * Hugging Face `tokenizer.json` loader (byte-level BPE only), wrapping
 * @huggingface/tokenizers with the config lookups the trainer needs.
 */
import { existsSync } from "node:fs";
import { readTextInput } from "../util/read-file.js";
import { join } from "node:path";
import { Tokenizer as HFTokenizer } from "@huggingface/tokenizers";
import { ModelFormatError } from "../util/errors.js";

type JsonObject = Record<string, unknown>;

/** The part of @huggingface/tokenizers we use; its .d.ts files do not resolve under NodeNext (types become any). */
interface HfTokenizerApi {
  encode(text: string, opts: { add_special_tokens: boolean }): { ids: number[]; tokens: string[] };
  decode(ids: number[], opts: { skip_special_tokens: boolean; clean_up_tokenization_spaces: boolean }): string;
  token_to_id(token: string): number | undefined;
  id_to_token(id: number): string | undefined;
}

/** GPT-2 byte -> printable char table; index = byte value. */
export const BYTE_ALPHABET: readonly string[] = (() => {
  const table: string[] = new Array(256);
  let extra = 0;
  for (let b = 0; b < 256; b++) {
    const printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
    table[b] = String.fromCharCode(printable ? b : 256 + extra++);
  }
  return table;
})();
const CHAR_TO_BYTE = new Map(BYTE_ALPHABET.map((c, b) => [c, b]));
const utf8 = new TextEncoder();

function isObject(v: unknown): v is JsonObject {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function readJsonFile(path: string): JsonObject {
  const text = readTextInput(path, (words) => new ModelFormatError(path, undefined, words));
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    throw new ModelFormatError(path, undefined, `invalid JSON: ${(err as Error).message}`);
  }
  if (!isObject(parsed)) throw new ModelFormatError(path, undefined, "expected a JSON object at the top level");
  return parsed;
}

/** tokenizer_config tokens may be "x" or {content: "x", ...}. */
function tokenString(v: unknown): string | undefined {
  if (typeof v === "string") return v;
  if (isObject(v) && typeof v.content === "string") return v.content;
  return undefined;
}

function pickChatTemplate(v: unknown): string | undefined {
  if (typeof v === "string") return v;
  if (Array.isArray(v)) {
    const named = v.filter(
      (e): e is { name: string; template: string } => isObject(e) && typeof e.template === "string",
    );
    return (named.find((e) => e.name === "default") ?? named[0])?.template;
  }
  return undefined;
}

function isByteLevelDecoder(dec: unknown): boolean {
  if (!isObject(dec)) return false;
  if (dec.type === "ByteLevel") return true;
  return dec.type === "Sequence" && Array.isArray(dec.decoders) && dec.decoders.some(isByteLevelDecoder);
}

export class Tokenizer {
  private readonly hf: HfTokenizerApi;
  private readonly addedById = new Map<number, { content: string; special: boolean }>();
  readonly vocabSize: number;
  readonly specialTokenIds: ReadonlySet<number>;
  readonly chatTemplate: string | undefined;
  readonly bosToken: string | undefined;
  readonly eosToken: string | undefined;
  /** True when ids map to bytes through BYTE_ALPHABET (needed for exact streaming). */
  readonly byteLevel: boolean;
  private readonly padToken: string | undefined;

  private constructor(json: JsonObject, config: JsonObject, jsonFile: string, configFile: string, template?: string) {
    const model = json.model;
    if (!isObject(model)) throw new ModelFormatError(jsonFile, "model", "missing or not an object");
    if (model.type !== "BPE") {
      throw new ModelFormatError(
        jsonFile,
        "model.type",
        `unsupported tokenizer model '${String(model.type)}'; supported: BPE`,
      );
    }
    if (!isObject(model.vocab))
      throw new ModelFormatError(jsonFile, "model.vocab", "expected an object of token -> id");
    if (!Array.isArray(model.merges)) throw new ModelFormatError(jsonFile, "model.merges", "expected an array");
    const added = json.added_tokens ?? [];
    if (!Array.isArray(added)) throw new ModelFormatError(jsonFile, "added_tokens", "expected an array");
    for (const [i, t] of added.entries()) {
      if (!isObject(t) || typeof t.content !== "string" || !Number.isInteger(t.id)) {
        throw new ModelFormatError(jsonFile, `added_tokens[${i}]`, "expected {id: integer, content: string}");
      }
      this.addedById.set(t.id as number, { content: t.content, special: t.special === true });
    }
    if (!isObject(config)) throw new ModelFormatError(configFile, undefined, "expected a JSON object");

    // The library requires these keys to exist (null allowed) and never to clean up spaces.
    const full: JsonObject = {
      normalizer: null,
      pre_tokenizer: null,
      post_processor: null,
      decoder: null,
      ...json,
      added_tokens: added,
    };
    try {
      this.hf = new HFTokenizer(full, { ...config, clean_up_tokenization_spaces: false }) as HfTokenizerApi;
    } catch (err) {
      throw new ModelFormatError(jsonFile, undefined, `cannot build tokenizer: ${(err as Error).message}`);
    }

    let maxId = -1;
    for (const id of Object.values(model.vocab)) if (typeof id === "number" && id > maxId) maxId = id;
    for (const id of this.addedById.keys()) if (id > maxId) maxId = id;
    this.vocabSize = maxId + 1;
    this.specialTokenIds = new Set([...this.addedById].filter(([, t]) => t.special).map(([id]) => id));
    this.byteLevel = isByteLevelDecoder(json.decoder);
    this.chatTemplate = pickChatTemplate(config.chat_template) ?? template;
    this.bosToken = tokenString(config.bos_token);
    this.padToken = tokenString(config.pad_token);
    const eos = tokenString(config.eos_token);
    this.eosToken = eos ?? ["<|im_end|>", "<|endoftext|>"].find((t) => this.tokenToId(t) !== undefined);
  }

  /** Reads tokenizer.json and, when given, tokenizer_config.json (then it must exist). */
  static fromFiles(tokenizerJsonPath: string, tokenizerConfigPath?: string): Tokenizer {
    const json = readJsonFile(tokenizerJsonPath);
    const config = tokenizerConfigPath ? readJsonFile(tokenizerConfigPath) : {};
    return new Tokenizer(json, config, tokenizerJsonPath, tokenizerConfigPath ?? "tokenizer_config.json");
  }

  /** A model directory; a separate chat_template.jinja is used when the config has none. */
  static fromDir(dir: string): Tokenizer {
    const json = readJsonFile(join(dir, "tokenizer.json"));
    const configPath = join(dir, "tokenizer_config.json");
    const config = existsSync(configPath) ? readJsonFile(configPath) : {};
    const jinjaPath = join(dir, "chat_template.jinja");
    const template = existsSync(jinjaPath)
      ? readTextInput(jinjaPath, (words) => new ModelFormatError(jinjaPath, undefined, words))
      : undefined;
    return new Tokenizer(json, config, join(dir, "tokenizer.json"), configPath, template);
  }

  static fromObjects(json: object, config: object = {}): Tokenizer {
    if (!isObject(json)) throw new ModelFormatError("tokenizer.json", undefined, "expected a JSON object");
    return new Tokenizer(json, config as JsonObject, "tokenizer.json", "tokenizer_config.json");
  }

  /** Default adds no BOS/EOS: chat templates place them. */
  encode(text: string, opts: { addSpecialTokens?: boolean } = {}): number[] {
    if (text.length === 0) return [];
    return this.hf.encode(text, { add_special_tokens: opts.addSpecialTokens ?? false }).ids;
  }

  /** Ids without a token (e.g. padded embedding rows) decode to nothing. */
  decode(ids: number[], opts: { skipSpecialTokens?: boolean } = {}): string {
    const known = ids.filter((id) => this.hf.id_to_token(id) !== undefined);
    if (known.length === 0) return "";
    return this.hf.decode(known, {
      skip_special_tokens: opts.skipSpecialTokens ?? false,
      clean_up_tokenization_spaces: false,
    });
  }

  tokenToId(token: string): number | undefined {
    return this.hf.token_to_id(token);
  }

  idToToken(id: number): string | undefined {
    return this.hf.id_to_token(id);
  }

  get eosTokenId(): number | undefined {
    return this.eosToken === undefined ? undefined : this.tokenToId(this.eosToken);
  }

  /** pad_token, else `<|endoftext|>`, else EOS. */
  get padTokenId(): number | undefined {
    const byPad = this.padToken === undefined ? undefined : this.tokenToId(this.padToken);
    return byPad ?? this.tokenToId("<|endoftext|>") ?? this.eosTokenId;
  }

  isSpecial(id: number): boolean {
    return this.specialTokenIds.has(id);
  }

  /** Raw bytes of one token: added tokens verbatim, others via the byte alphabet. */
  tokenBytes(id: number): Uint8Array {
    const added = this.addedById.get(id);
    if (added) return utf8.encode(added.content);
    const tok = this.idToToken(id);
    if (tok === undefined) return new Uint8Array(0);
    if (!this.byteLevel) return utf8.encode(this.decode([id]));
    const out = new Uint8Array(tok.length);
    for (let i = 0; i < tok.length; i++) {
      const b = CHAR_TO_BYTE.get(tok[i]);
      if (b === undefined) return utf8.encode(this.decode([id]));
      out[i] = b;
    }
    return out;
  }
}

/** Streams text from ids, holding back incomplete UTF-8 sequences until they complete. */
export class IncrementalDecoder {
  private decoder = new TextDecoder("utf-8", { fatal: false, ignoreBOM: true });
  private all = "";

  constructor(
    private readonly tokenizer: Tokenizer,
    private readonly opts: { skipSpecialTokens?: boolean } = {},
  ) {}

  /** Returns only the text completed by this id ("" while a character is still partial). */
  push(id: number): string {
    if (this.opts.skipSpecialTokens && this.tokenizer.isSpecial(id)) return "";
    const piece = this.decoder.decode(this.tokenizer.tokenBytes(id), { stream: true });
    this.all += piece;
    return piece;
  }

  pushAll(ids: Iterable<number>): string {
    let out = "";
    for (const id of ids) out += this.push(id);
    return out;
  }

  /** Ends the stream; dangling bytes become U+FFFD. */
  flush(): string {
    const rest = this.decoder.decode();
    this.all += rest;
    return rest;
  }

  /** All text emitted so far. */
  get text(): string {
    return this.all;
  }

  reset(): void {
    this.decoder = new TextDecoder("utf-8", { fatal: false, ignoreBOM: true });
    this.all = "";
  }
}
