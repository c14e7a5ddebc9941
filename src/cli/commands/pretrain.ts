import { PRESETS, type PresetName } from "../../model/config.js";
import { WARM_START_DEFAULTS, warmStart } from "../../train/warm-start.js";
import { InputError } from "../../util/errors.js";
import { optionalNumber, parseFlags } from "../args.js";
import type { Command } from "../command.js";
import { checkOutDir, FORCE_FLAG } from "../../util/out-path.js";
import { Progress } from "../progress.js";
import { TASK_FLAGS, taskFromFlags } from "./task-flags.js";
import { WORLDS_FLAG, worldsFromFlags } from "./worlds-flag.js";
import { BACKEND_FLAG, BACKEND_USAGE, backendFromFlags } from "./backend-flag.js";
import { localEngines } from "../../engine/local/factory.js";

const D = WARM_START_DEFAULTS;

export const pretrainCommand: Command = {
  name: "pretrain",
  summary: "warm-start a base model: task tokenizer, fresh preset model, SFT on expert + careless demonstrations",
  usage:
    `agent-r1 pretrain --task multihop|calc [--preset tiny|small] [--init MODEL_DIR] [--copy-steps N] [--copy-lr X] [--copy-blend F] [--tokenizer DIR] [--vocab N] [--quality Q] [--worlds N] [--steps N] [--batch N] [--lr X] [--out DIR] [--force] [--seed N] [--option name=value ...] ${BACKEND_USAGE}` +
    `\n  defaults: --preset ${D.preset} --copy-steps ${D.copySteps} --copy-lr ${D.copyLr} --copy-blend ${D.copyBlend} --vocab ${D.vocabSize} --quality ${D.quality} --worlds ${D.worlds} --steps ${D.steps} --batch ${D.batchSize} --lr ${D.lr} --seed ${D.seed} --option train=${D.trainQuestions}`,
  async run(argv, io) {
    const { flags } = parseFlags("pretrain", argv, {
      ...TASK_FLAGS,
      preset: { type: "string", default: D.preset },
      tokenizer: { type: "string" },
      init: { type: "string" },
      "copy-steps": { type: "string" },
      "copy-lr": { type: "string" },
      "copy-blend": { type: "string" },
      vocab: { type: "string" },
      quality: { type: "string" },
      ...WORLDS_FLAG,
      steps: { type: "string" },
      batch: { type: "string" },
      lr: { type: "string" },
      out: { type: "string" },
      seed: { type: "string" },
      ...FORCE_FLAG,
      ...BACKEND_FLAG,
    });
    const task = taskFromFlags("pretrain", flags, { train: D.trainQuestions });
    const preset = flags.preset as string;
    if (!(preset in PRESETS)) throw new InputError(`pretrain: unknown --preset '${preset}'; choose one of: ${Object.keys(PRESETS).join(", ")}`);
    const num = (name: string) => optionalNumber("pretrain", flags, name);
    const quality = num("quality") ?? D.quality;
    if (!(quality >= 0 && quality <= 1)) throw new InputError(`pretrain: --quality must be in [0, 1], got ${quality}`);
    const copyBlend = num("copy-blend") ?? D.copyBlend;
    if (!(copyBlend >= 0 && copyBlend <= 1)) throw new InputError(`pretrain: --copy-blend must be in [0, 1], got ${copyBlend}`);
    const { worlds, tasks: demoTasks } = worldsFromFlags("pretrain", flags, task, D.worlds);
    const steps = num("steps") ?? D.steps;
    const out = (flags.out as string | undefined) ?? `runs/base-${task.name}`;
    // Checked now, not after the half hour of training that ends by writing it.
    checkOutDir(out, { command: "pretrain", force: flags.force === true, inputs: [{ label: "--init model", path: flags.init as string | undefined }, { label: "tokenizer directory", path: flags.tokenizer as string | undefined }] });
    io.out(`pretrain: ${preset} model on '${task.name}' demonstrations (quality ${quality}, ${worlds} world${worlds === 1 ? "" : "s"}), ${steps} steps → ${out}`);
    const backend = backendFromFlags("pretrain", flags, io);
    const copyProgress = new Progress({ label: "copy", total: num("copy-steps") ?? D.copySteps });
    const progress = new Progress({ label: "sft", total: steps });
    const t0 = Date.now();
    try {
      const res = await warmStart({
        task, out, preset: preset as PresetName, tokenizer: flags.tokenizer as string | undefined, vocabSize: num("vocab") ?? D.vocabSize,
        quality, steps, batchSize: num("batch") ?? D.batchSize, lr: num("lr") ?? D.lr, seed: num("seed") ?? D.seed,
        engines: localEngines({ backend }), init: flags.init as string | undefined, copySteps: num("copy-steps") ?? D.copySteps, copyLr: num("copy-lr") ?? D.copyLr, copyBlend, demoTasks,
        onCopyStep: (s) => copyProgress.update(s.step, { loss: s.loss }),
        onStep: (s) => { copyProgress.finish(); progress.update(s.step, { loss: s.loss, lr: s.lr.toExponential(1) }); },
      });
      progress.finish();
      io.out(`wrote ${res.dir}: ${(res.parameters / 1e6).toFixed(2)}M parameters, ${res.demonstrations} demonstrations, ` +
        `cross-entropy ${res.lossBefore.toFixed(3)} → ${res.lossAfter.toFixed(3)} nats/token, ${((Date.now() - t0) / 60000).toFixed(1)} min`);
    } catch (e) {
      progress.finish();
      throw e;
    }
  },
};
