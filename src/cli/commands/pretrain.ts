import { PRESETS, type PresetName } from "../../model/config.js";
import { WARM_START_DEFAULTS, warmStart } from "../../train/warm-start.js";
import { noPositionals, optionalInt, optionalNumber, parseFlags, usageError, type FlagSpec } from "../args.js";
import type { Command } from "../command.js";
import { checkOutDir } from "../../util/out-path.js";
import { Progress } from "../progress.js";
import { TASK_FLAGS, taskFromFlags } from "./task-flags.js";
import { worldsFlag, worldsFromFlags } from "./worlds-flag.js";
import { BACKEND_FLAG, announceBackend, parseBackendFlag } from "./backend-flag.js";
import { FORCE_FLAG } from "./force-flag.js";
import { localEngines } from "../../engine/local/factory.js";

const D = WARM_START_DEFAULTS;

const FLAGS: FlagSpec = {
  ...TASK_FLAGS,
  option: {
    ...TASK_FLAGS.option,
    description: `a task option; train=N sets the number of demonstration questions (default train=${D.trainQuestions})`,
  },
  preset: {
    type: "string",
    value: Object.keys(PRESETS).join("|"),
    default: D.preset,
    description: "size of the fresh model",
  },
  init: {
    type: "string",
    value: "MODEL_DIR",
    description: "start from this model (and its tokenizer) instead of a fresh preset model",
  },
  tokenizer: {
    type: "string",
    value: "DIR",
    description: "use this tokenizer instead of training one on the task's text",
  },
  vocab: {
    type: "string",
    value: "N",
    description: "vocabulary size of the tokenizer trained on the task's text",
    fallback: D.vocabSize,
  },
  "copy-steps": {
    type: "string",
    value: "N",
    description: "steps of the copying curriculum (word lists repeated) before the demonstrations; 0 skips it",
    fallback: D.copySteps,
  },
  "copy-lr": {
    type: "string",
    value: "X",
    description: "peak learning rate of the copying curriculum",
    fallback: D.copyLr,
  },
  "copy-blend": {
    type: "string",
    value: "F",
    description: "share of made-up words in the copying curriculum, in [0, 1]",
    fallback: D.copyBlend,
  },
  quality: {
    type: "string",
    value: "Q",
    description: "share of expert demonstrations, in [0, 1]; the rest are careless",
    fallback: D.quality,
  },
  ...worldsFlag(D.worlds),
  steps: { type: "string", value: "N", description: "supervised steps on the demonstrations", fallback: D.steps },
  batch: { type: "string", value: "N", description: "demonstrations per supervised step", fallback: D.batchSize },
  lr: { type: "string", value: "X", description: "peak learning rate of the supervised steps", fallback: D.lr },
  out: {
    type: "string",
    value: "DIR",
    description: "the model directory to write: new or empty",
    fallback: "runs/base-<task>",
  },
  seed: {
    type: "string",
    value: "N",
    description: "seed of the tokenizer, the weights and the demonstrations",
    fallback: D.seed,
  },
  ...FORCE_FLAG,
  ...BACKEND_FLAG,
};

export const pretrainCommand: Command = {
  name: "pretrain",
  summary: "warm-start a base model: task tokenizer, fresh preset model, SFT on expert + careless demonstrations",
  usage: "agent-r1 pretrain --task NAME [flags]",
  flags: FLAGS,
  async run(argv, io) {
    const { flags, positionals } = parseFlags("pretrain", argv, FLAGS);
    noPositionals("pretrain", positionals);
    // With one world the task's own train split is the demonstrations (D.trainQuestions of them); with
    // more, the worlds hold them (worldsFromFlags) and the task keeps its own sizes (a shop of 2,000
    // products cannot hold 8,192 instructions).
    const oneWorld = (optionalNumber("pretrain", flags, "worlds") ?? D.worlds) === 1;
    const task = taskFromFlags("pretrain", flags, oneWorld ? { train: D.trainQuestions } : {});
    const preset = flags.preset as string;
    if (!Object.hasOwn(PRESETS, preset))
      throw usageError("pretrain", `unknown --preset '${preset}'; choose one of: ${Object.keys(PRESETS).join(", ")}`);
    const num = (name: string) => optionalNumber("pretrain", flags, name);
    const quality = num("quality") ?? D.quality;
    if (!(quality >= 0 && quality <= 1)) throw usageError("pretrain", `--quality must be in [0, 1], got ${quality}`);
    const copyBlend = num("copy-blend") ?? D.copyBlend;
    if (!(copyBlend >= 0 && copyBlend <= 1))
      throw usageError("pretrain", `--copy-blend must be in [0, 1], got ${copyBlend}`);
    const { worlds, tasks: demoTasks } = worldsFromFlags("pretrain", flags, task, D.worlds);
    const steps = optionalInt("pretrain", flags, "steps", 0) ?? D.steps;
    const copySteps = optionalInt("pretrain", flags, "copy-steps", 0) ?? D.copySteps;
    const batchSize = optionalInt("pretrain", flags, "batch", 1) ?? D.batchSize;
    const vocabSize = num("vocab") ?? D.vocabSize,
      lr = num("lr") ?? D.lr,
      copyLr = num("copy-lr") ?? D.copyLr,
      seed = num("seed") ?? D.seed;
    const backend = parseBackendFlag("pretrain", flags);
    const out = (flags.out as string | undefined) ?? `runs/base-${task.name}`;
    // Checked now, not after the half hour of training that ends by writing it.
    checkOutDir(out, {
      command: "pretrain",
      force: flags.force === true,
      inputs: [
        { label: "--init model", path: flags.init as string | undefined },
        { label: "tokenizer directory", path: flags.tokenizer as string | undefined },
      ],
    });
    io.out(
      `pretrain: ${preset} model on '${task.name}' demonstrations (quality ${quality}, ${worlds} world${worlds === 1 ? "" : "s"}), ${steps} steps → ${out}`,
    );
    const copyProgress = new Progress({ label: "copy", total: copySteps });
    const progress = new Progress({ label: "sft", total: steps });
    const t0 = Date.now();
    try {
      const res = await warmStart({
        task,
        out,
        preset: preset as PresetName,
        tokenizer: flags.tokenizer as string | undefined,
        vocabSize,
        quality,
        steps,
        batchSize,
        lr,
        seed,
        engines: localEngines({ backend }),
        init: flags.init as string | undefined,
        copySteps,
        copyLr,
        copyBlend,
        demoTasks,
        onCopyStep: (s) => {
          announceBackend(backend, io); // the engine has loaded by the first step
          copyProgress.update(s.step, { loss: s.loss });
        },
        onStep: (s) => {
          announceBackend(backend, io);
          copyProgress.finish();
          progress.update(s.step, { loss: s.loss, lr: s.lr.toExponential(1) });
        },
      });
      progress.finish();
      io.out(
        `wrote ${res.dir}: ${(res.parameters / 1e6).toFixed(2)}M parameters, ${res.demonstrations} demonstrations, ` +
          `cross-entropy ${res.lossBefore.toFixed(3)} → ${res.lossAfter.toFixed(3)} nats/token, ${((Date.now() - t0) / 60000).toFixed(1)} min`,
      );
    } catch (e) {
      progress.finish();
      throw e;
    }
  },
};
