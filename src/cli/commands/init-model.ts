import { initModel } from "../../model/init-model.js";
import { PRESETS, type PresetName } from "../../model/config.js";
import { optionalNumber, parseFlags, requireString } from "../args.js";
import { InputError } from "../../util/errors.js";
import type { Command } from "../command.js";
import { checkOutDir, FORCE_FLAG } from "../../util/out-path.js";

export const initModelCommand: Command = {
  name: "init-model",
  summary: "write a randomly initialized model directory (Hugging Face format)",
  usage: "agent-r1 init-model --preset tiny|small|medium --out DIR [--tokenizer DIR] [--seed N] [--force]  (--out must be new or empty; --force replaces a non-empty one)",
  async run(argv, io) {
    const { flags } = parseFlags("init-model", argv, {
      preset: { type: "string", default: "tiny" },
      out: { type: "string" },
      tokenizer: { type: "string" },
      seed: { type: "string" },
      ...FORCE_FLAG,
    });
    const preset = flags.preset as string;
    if (!(preset in PRESETS)) throw new InputError(`init-model: unknown --preset '${preset}'; choose one of: ${Object.keys(PRESETS).join(", ")}`);
    const out = requireString("init-model", flags, "out");
    checkOutDir(out, { command: "init-model", force: flags.force === true, inputs: [{ label: "tokenizer directory", path: flags.tokenizer as string | undefined }] });
    const res = await initModel({ preset: preset as PresetName, out, tokenizer: flags.tokenizer as string | undefined, seed: optionalNumber("init-model", flags, "seed") });
    io.out(`wrote ${res.dir} (${preset}, ${(res.parameters / 1e6).toFixed(2)}M parameters)`);
  },
};
