import { initModel } from "../../model/init-model.js";
import { PRESETS, type PresetName } from "../../model/config.js";
import { noPositionals, optionalNumber, parseFlags, requireString, usageError, type FlagSpec } from "../args.js";
import type { Command } from "../command.js";
import { checkOutDir } from "../../util/out-path.js";
import { FORCE_FLAG } from "./force-flag.js";

const FLAGS: FlagSpec = {
  preset: {
    type: "string",
    value: Object.keys(PRESETS).join("|"),
    default: "tiny",
    description: "model size (Qwen2 layout)",
  },
  out: { type: "string", value: "DIR", description: "the model directory to write: new or empty (required)" },
  tokenizer: {
    type: "string",
    value: "DIR",
    description: "take tokenizer.json and tokenizer_config.json from here; default the shipped assets/tokenizer",
  },
  seed: { type: "string", value: "N", description: "seed of the random weights" },
  ...FORCE_FLAG,
};

export const initModelCommand: Command = {
  name: "init-model",
  summary: "write a randomly initialized model directory (Hugging Face format)",
  usage: "agent-r1 init-model --out DIR [flags]",
  flags: FLAGS,
  async run(argv, io) {
    const { flags, positionals } = parseFlags("init-model", argv, FLAGS);
    noPositionals("init-model", positionals);
    const preset = flags.preset as string;
    if (!Object.hasOwn(PRESETS, preset))
      throw usageError("init-model", `unknown --preset '${preset}'; choose one of: ${Object.keys(PRESETS).join(", ")}`);
    const out = requireString("init-model", flags, "out");
    const seed = optionalNumber("init-model", flags, "seed");
    checkOutDir(out, {
      command: "init-model",
      force: flags.force === true,
      inputs: [{ label: "tokenizer directory", path: flags.tokenizer as string | undefined }],
    });
    const res = await initModel({
      preset: preset as PresetName,
      out,
      tokenizer: flags.tokenizer as string | undefined,
      seed,
    });
    io.out(`wrote ${res.dir} (${preset}, ${(res.parameters / 1e6).toFixed(2)}M parameters)`);
  },
};
