/**
 * The RL training loop, as a short sequence of named stages per iteration:
 *   rows → rollout → prepare (judge, filters, rewards, reference, critic, advantages,
 *   teacher, datums) → update (policy, then critic) → validate → record → checkpoint.
 * A run directory holds config.yaml, metrics.jsonl, samples/iter-N.jsonl and
 * checkpoints/step-N; `resume` continues from the newest complete checkpoint
 * with the same data order and no lost or repeated iteration.
 *
 * With train.async the rollout becomes a producer (src/train/async/) that samples the next
 * batches while the learner trains, at most a bounded number of versions behind.
 *
 * Opening a run reads and checks everything first (checkpoint, data files,
 * models) and only then writes to the run directory, so a bad input leaves it
 * as it was. Guarantees and their tests: docs/reliability.md.
 */
import { appendFileSync, existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { stringify as toYaml } from "yaml";
import { z } from "zod";
import type { EngineFactory, OwnedCritic, PolicyEngine } from "../engine/factory.js";
import type { LossSpec } from "../engine/types.js";
import { Rng } from "../util/rng.js";
import { advantageEstimator } from "../rl/advantages/index.js";
import { decodeTrajectory } from "../agent/trajectory-view.js";
import type { Task, TaskRow } from "../tasks/types.js";
import type { TrainConfig } from "./config.js";
import { nextBatch, type DataCursor } from "./data-order.js";
import {
  listCheckpoints,
  removeUnfinishedCheckpoints,
  scanCheckpoints,
  writeCheckpoint,
  type FoundCheckpoint,
  type StateParser,
} from "./checkpoint.js";
import { prepareBatch, type BatchModels } from "./prepare-batch.js";
import { judgeDropNote, judgeMetrics } from "./judge-metrics.js";
import { judgeReward, type JudgeReward } from "../rewards/judge.js";
import { judgeTrajectories } from "../rewards/judge-trajectories.js";
import { toolBudgetWarning } from "./tool-budget.js";
import { checkNewRunDir } from "./run-dir.js";
import { clearDirectory } from "../util/out-path.js";
import { lossSpec, updateCritic, updatePolicy, withKlCoef } from "./update.js";
import { adaptiveKlController, fixedKlController, type KlController } from "../rl/kl.js";
import { hasProcessRewards } from "../rl/episode-rewards.js";
import { checkCompactionTask, describeFailure, isAgentFailure, playRows, type EpisodeSummary } from "./evaluate.js";
import { readTaskRowsFile, skippedRowsNote } from "../data/task-rows-file.js";
import type { Trajectory } from "../agent/trajectory.js";
import { AgentR1Error, InputError } from "../util/errors.js";
import { makeDir } from "../util/make-dir.js";
import { distillMetrics, gatewayMetrics, perEpisode, prefixed, std, truncateMetrics } from "./metric-lines.js";
import { RolloutProducer } from "./async/rollout-producer.js";
import { AbortableSampling, VersionedPolicy } from "./async/versioned-policy.js";
import { consumedBatch, producedBatch, type GatheredBatch, type ProducedBatch } from "./async/async-batches.js";
import { lookahead, stepsPerIteration } from "./async/staleness.js";
import { checkTeacherTokenizer, openTeacher, teacherTokenizerDir, type Teacher } from "../engine/teacher.js";
import { defaultTokenizerDir } from "../model/default-tokenizer.js";

export interface TrainState {
  /** Last completed iteration (0 before the first). */
  iteration: number;
  cursor: DataCursor;
  optimizerSteps: number;
  /** The adaptive KL coefficient after the last iteration (algorithm.kl.target); absent with a fixed one. */
  klCoef?: number;
}

const trainStateSchema = z.strictObject({
  iteration: z.number().int().positive(),
  cursor: z.strictObject({ epoch: z.number().int().nonnegative(), position: z.number().int().nonnegative() }),
  optimizerSteps: z.number().int().nonnegative(),
  klCoef: z.number().nonnegative().optional(),
});

/** A checkpoint's state.json, checked: the shape above, written at the iteration its directory names. */
export const parseTrainState: StateParser<TrainState> = (raw, step) => {
  const res = trainStateSchema.safeParse(raw);
  if (!res.success) {
    const issue = res.error.issues[0];
    return { error: `state.json: ${issue.path.map(String).join(".") || "(top)"}: ${issue.message}` };
  }
  if (res.data.iteration !== step)
    return { error: `state.json: iteration ${res.data.iteration} is not the checkpoint's step ${step}` };
  return { state: res.data };
};

/** The model directories of a checkpoint, read back as the engine will: why one is unusable, if it is. */
function checkpointModelsProblem(engines: EngineFactory, dir: string): string | undefined {
  for (const role of ["policy", "critic"]) {
    const sub = join(dir, role);
    if (role === "critic" && !existsSync(sub)) continue;
    const problem = engines.checkSaved?.(sub);
    if (problem) return problem.replace(`${dir}/`, "");
  }
  return undefined;
}

export type IterationMetrics = Record<string, number>;

export interface TrainOptions {
  out: string;
  task: Task;
  /** Where the policy, the reference and the critic come from (the edge builds it from `engine.kind`; `localEngines` for the local kind). */
  engines: EngineFactory;
  /** Continue from the newest complete checkpoint in `out`. */
  resume?: boolean;
  /** Start a new run even though `out` is not empty: what is there is deleted (never a directory the run reads, nor the working directory). */
  force?: boolean;
  /** A judge reward built in code (`judgeReward`), instead of the recipe's `reward.judge`. */
  judge?: JudgeReward;
  /** The command, for messages about `out`. Default "train". */
  command?: string;
  onIteration?: (m: IterationMetrics) => void;
  log?: (line: string) => void;
}

/** The recipe's KL coefficient: fixed, or verl's adaptive controller (from `resumed`, a checkpoint's coefficient). */
function klController(kl: TrainConfig["algorithm"]["kl"], resumed?: number): KlController {
  if (kl.target === undefined) return fixedKlController(kl.coef);
  return adaptiveKlController({ initCoef: resumed ?? kl.coef, target: kl.target, horizon: kl.horizon });
}

export class Trainer {
  private state: TrainState = { iteration: 0, cursor: { epoch: 0, position: 0 }, optimizerSteps: 0 };
  private critic?: OwnedCritic;
  private reference?: PolicyEngine;
  private trainRows: TaskRow[] = [];
  private valRows: TaskRow[] = [];
  private judge?: JudgeReward;
  private teacher?: Teacher;
  /** The recipe's loss, built once; each iteration sets its KL coefficient. */
  private readonly spec: LossSpec;
  private kl: KlController;
  /** Whether the note about per-step rewards that algorithm.processRewardWeight 0 ignores was given. */
  private processNoteGiven = false;
  /** train.async: the policy wrapped to count versions, and the producer of the batches ahead (started by the first step). */
  private versioned?: VersionedPolicy;
  private producer?: RolloutProducer<ProducedBatch>;

  private constructor(
    readonly cfg: TrainConfig,
    private engine: PolicyEngine,
    private opts: TrainOptions,
  ) {
    this.spec = lossSpec(cfg);
    this.kl = klController(cfg.algorithm.kl);
  }

  /**
   * Sets up (or reopens) the run directory and the models. Everything that
   * can be wrong with the inputs (no checkpoint to resume, a run already in
   * `out`, bad data rows, a broken model directory) fails before anything in
   * the run directory is written.
   */
  static async open(cfg: TrainConfig, opts: TrainOptions): Promise<Trainer> {
    const out = opts.out;
    const judge = openJudge(cfg, opts.judge);
    // Logged once the inputs are known good, so a failure is the only line printed.
    const notes: string[] = [];
    let found: FoundCheckpoint<TrainState> | undefined;
    if (opts.resume) {
      const scan = scanCheckpoints<TrainState>(out, (raw, step) => {
        const res = parseTrainState(raw, step);
        const models =
          "state" in res ? checkpointModelsProblem(opts.engines, join(out, "checkpoints", `step-${step}`)) : undefined;
        return models ? { error: models } : res;
      });
      const why = scan.skipped.map((s) => `${join(out, "checkpoints", `step-${s.step}`)}: ${s.reason}`);
      if (!scan.found)
        throw new InputError(
          `${out}: no complete checkpoint to resume from${why.length ? ` (${why.join("; ")})` : ""}`,
        );
      found = scan.found;
      notes.push(...why.map((w) => `skipping checkpoint ${w}; resuming from step-${scan.found!.step}`));
    }
    const inputs = [
      { label: "model", path: cfg.model.path },
      { label: "tokenizer directory", path: cfg.model.tokenizer },
      { label: "data file", path: cfg.data.train },
      { label: "data file", path: cfg.data.val },
      ...(cfg.algorithm.distill
        ? [{ label: "teacher model", path: teacherTokenizerDir(cfg.algorithm.distill.teacher) }]
        : []),
    ];
    checkCompactionTask(opts.task, cfg.rollout.compaction);
    const replace = !opts.resume && checkNewRunDir(out, { command: opts.command, force: opts.force, inputs });
    const rows = await readRows(cfg, opts.task, notes);
    if (cfg.algorithm.distill) checkTeacherTokenizer(cfg.algorithm.distill.teacher, studentTokenizerDir(cfg));
    if (replace) clearDirectory(out);
    const engines = opts.engines;
    const base = await baseModel(cfg, out, engines);
    const engine = await engines.policy(found ? join(found.dir, "policy") : base);
    const tooManyTools = toolBudgetWarning(opts.task, engine.tokenizer, {
      maxTotalTokens: cfg.rollout.maxTotalTokens,
      maxPositionEmbeddings: engine.config.maxPositionEmbeddings,
    });
    if (tooManyTools) notes.push(tooManyTools);
    const t = new Trainer(cfg, engine, opts);
    try {
      if (cfg.algorithm.kl.coef > 0) t.reference = await engines.reference(base);
      if (cfg.algorithm.distill) {
        t.teacher = await openTeacher(cfg.algorithm.distill.teacher, {
          engines,
          tinker: cfg.engine.tinker,
          log: opts.log,
        });
        notes.push(`distilling from ${t.teacher.describe()}`);
      }
      if (advantageEstimator(cfg.algorithm.estimator).needsValues) {
        t.critic = await engines.critic(engine);
        if (found) await t.critic.load(join(found.dir, "critic"));
      }
    } catch (e) {
      await t.close();
      throw e;
    }
    t.judge = judge;
    t.trainRows = rows.train;
    t.valRows = rows.val;
    // Inputs are good: now the run directory changes.
    makeDir(join(out, "samples"), "--out");
    writeFileSync(join(out, "config.yaml"), toYaml(cfg));
    if (found) {
      t.state = found.state;
      t.kl = klController(cfg.algorithm.kl, found.state.klCoef);
      truncateMetrics(out, found.state.iteration);
      for (const n of removeUnfinishedCheckpoints(out))
        notes.push(`removed ${join(out, "checkpoints", n)} (a checkpoint write that never finished)`);
    }
    if (cfg.train.async) t.engine = t.versioned = new VersionedPolicy(engine, t.state.optimizerSteps);
    for (const n of notes) opts.log?.(n);
    return t;
  }

  get iteration(): number {
    return this.state.iteration;
  }

  get policy(): PolicyEngine {
    return this.engine;
  }

  async run(): Promise<void> {
    while (this.state.iteration < this.cfg.train.iterations) await this.step();
  }

  /** One iteration, as named stages. */
  async step(): Promise<IterationMetrics> {
    const it = this.state.iteration + 1;
    const t0 = performance.now();
    const got = this.versioned ? await this.consumeBatch(it, this.versioned) : await this.playBatch(it);
    const ro = got.ro;
    this.reportFailedEpisodes(it, got.rows, ro.result.trajectories, ro.result.failed);
    const t1 = performance.now();
    const { klCoef, batch, upd, valueLoss } = await this.learn(it, got.trained, got.rows);
    this.producer?.finished(it);
    const t2 = performance.now();
    const val = this.validationDue(it) ? await this.validate(it) : undefined;
    const asyncMetrics = got.asyncMetrics ? { ...got.asyncMetrics, iteration_s: (performance.now() - t0) / 1000 } : {};
    const prefixHitRate = (await this.engine.prefixHitRate?.()) ?? 0;
    const m: IterationMetrics = {
      iteration: it,
      /** Rows consumed so far, counting epochs: shows the data order is the same after a resume. */
      data_position: this.state.cursor.epoch * this.trainRows.length + this.state.cursor.position,
      ...prefixed("", ro.summary),
      reward_std: std(ro.result.trajectories.map((t) => t.reward)),
      ...(batch.judge ? judgeMetrics(batch.judge, ro.result.trajectories) : {}),
      loss: upd.loss,
      ...(upd.entropy !== undefined ? { entropy: upd.entropy } : {}),
      ...(upd.clipFraction !== undefined ? { clip_fraction: upd.clipFraction } : {}),
      approx_kl: upd.approxKl ?? 0,
      ...(batch.klRef !== undefined ? { kl_ref: batch.klRef } : {}),
      ...(this.cfg.algorithm.kl.target !== undefined ? { kl_coef: klCoef } : {}),
      ...(batch.tis
        ? {
            sampler_drift: batch.tis.drift,
            sampler_kl: batch.tis.kl,
            tis_weight: batch.tis.meanWeight,
            tis_capped: batch.tis.cappedFraction,
          }
        : {}),
      ...(batch.offPolicy
        ? {
            offpolicy_masked_tokens: batch.offPolicy.maskedTokens,
            offpolicy_masked_seqs: batch.offPolicy.maskedSequences,
          }
        : {}),
      ...(batch.distill ? distillMetrics(batch.distill) : {}),
      grad_norm: upd.gradNorm,
      lr: upd.lr,
      skipped_steps: upd.skippedSteps,
      ...(valueLoss !== undefined ? { value_loss: valueLoss } : {}),
      groups_dropped: batch.droppedGroups,
      masked_overlong: batch.maskedOverlong,
      drift_mismatches: ro.result.metrics.driftMismatches,
      ...(this.cfg.rollout.compaction
        ? { compactions: perEpisode(ro.result.metrics.flowTurns, ro.result.metrics) }
        : {}),
      ...gatewayMetrics(ro.result.metrics.gateway),
      prefix_hit_rate: prefixHitRate,
      rollout_s: got.rolloutS ?? (t1 - t0) / 1000,
      train_s: (t2 - t1) / 1000,
      rollout_tokens_per_s: ro.result.metrics.actionTokensPerSecond,
      ...asyncMetrics,
      ...(val ? prefixed("val/", val) : {}),
    };
    this.state = { ...this.state, iteration: it };
    this.record(it, m, ro.result.trajectories);
    if (this.checkpointDue(it)) await this.checkpoint(it);
    this.opts.onIteration?.(m);
    return m;
  }

  /** Once a run: the env gave per-step rewards that algorithm.processRewardWeight 0 leaves out of every score. */
  private noteIgnoredProcessRewards(trajectories: Trajectory[]) {
    if (this.processNoteGiven || this.cfg.algorithm.processRewardWeight !== 0) return;
    if (!trajectories.some(hasProcessRewards)) return;
    this.processNoteGiven = true;
    this.opts.log?.(
      "train: the env gives per-step rewards (a process reward, or a step cost such as the household's invalidPenalty), but algorithm.processRewardWeight is 0, so training ignores them; set it (1 counts them in full)",
    );
  }

  /** The learner's stages: prepareBatch, updatePolicy (and the KL controller), updateCritic. */
  private async learn(it: number, trajectories: Trajectory[], rows: TaskRow[]) {
    const klCoef = this.kl.coef;
    this.noteIgnoredProcessRewards(trajectories);
    const batch = await prepareBatch(trajectories, this.cfg, this.batchModels(rows), klCoef);
    const judgeNote = batch.judge && judgeDropNote(it, batch.judge);
    if (judgeNote) this.opts.log?.(judgeNote);
    const upd = await updatePolicy(this.engine, batch.datums, {
      spec: withKlCoef(this.spec, klCoef),
      optim: this.cfg.optim,
      schedule: { step: this.state.optimizerSteps, totalSteps: this.totalSteps() },
      epochs: this.cfg.train.ppoEpochs,
      miniBatches: this.cfg.train.miniBatches,
      rng: new Rng(this.cfg.train.seed * 7919 + it, 7),
    });
    this.state.optimizerSteps += upd.steps;
    if (batch.klRef !== undefined) this.kl = this.kl.update(batch.klRef, batch.kept.length);
    if (this.cfg.algorithm.kl.target !== undefined) this.state.klCoef = this.kl.coef;
    const valueLoss = this.critic ? await updateCritic(this.critic, batch.valueDatums, this.cfg, it) : undefined;
    return { klCoef, batch, upd, valueLoss };
  }

  /** Lockstep: the next rows, played now with the current weights. */
  private async playBatch(it: number): Promise<GatheredBatch> {
    const next = this.rowsAfter(this.state.cursor);
    this.state.cursor = next.cursor;
    const ro = await this.rolloutStage(this.engine, next.rows, it);
    return { rows: next.rows, ro, trained: ro.result.trajectories };
  }

  /** The `batchSize` rows after `cursor` in the seeded order, and the cursor after them. */
  private rowsAfter(cursor: DataCursor): { rows: TaskRow[]; cursor: DataCursor } {
    const next = nextBatch(this.trainRows.length, this.cfg.train.seed, cursor, this.cfg.train.batchSize);
    return { rows: next.indices.map((i) => this.trainRows[i]), cursor: next.cursor };
  }

  /**
   * train.async: iteration `it`'s batch from the producer (started here, from the learner's state,
   * when none runs), judged for staleness at the current version; the data cursor moves to the
   * batch's end only now, so a checkpoint's cursor never counts batches still in flight.
   */
  private async consumeBatch(it: number, policy: VersionedPolicy): Promise<GatheredBatch> {
    this.producer ??= this.startProducer(policy);
    const taken = await this.producer.take(it);
    this.state.cursor = taken.value.cursor;
    return consumedBatch(taken, policy.version, this.cfg.train.async!);
  }

  /** The producer of the batches after the learner's: rows from its own copy of the cursor, played on the newest weights. */
  private startProducer(policy: VersionedPolicy): RolloutProducer<ProducedBatch> {
    let cursor = this.state.cursor;
    return new RolloutProducer<ProducedBatch>({
      first: this.state.iteration + 1,
      last: this.cfg.train.iterations,
      lookahead: lookahead(this.cfg.train.async!, stepsPerIteration(this.cfg.train)),
      produce: (it, signal) => {
        const next = this.rowsAfter(cursor);
        cursor = next.cursor;
        return producedBatch(next, policy.version, () =>
          this.rolloutStage(new AbortableSampling(policy, signal), next.rows, it),
        );
      },
    });
  }

  /**
   * train.async: stops the producer; batches it had started are discarded (their rows are drawn
   * again from the learner's cursor if training goes on). `close` does this; call it before using
   * the policy for anything else (an evaluation, a load).
   */
  async stopRollouts(): Promise<void> {
    const p = this.producer;
    this.producer = undefined;
    await p?.stop();
  }

  /**
   * Episodes whose env threw (at reset, step or close) are left out of the
   * batch, counted in the `failed` metric, and the first is logged with its row.
   * When every episode of an iteration failed the run stops: the env is broken,
   * and training on nothing would only hide it.
   */
  private reportFailedEpisodes(it: number, rows: TaskRow[], ok: Trajectory[], failed: Trajectory[]): void {
    if (failed.length === 0) return;
    const what = describeFailure(rows, failed[0], "of the batch");
    const total = failed.length + ok.length;
    if (ok.length === 0) {
      const fix = isAgentFailure(failed[0]) ? "fix the agent" : "fix the task's environment";
      const last = listCheckpoints(this.opts.out)[0];
      throw new AgentR1Error(
        `iteration ${it}: all ${total} episodes failed; first: ${what}`,
        last === undefined
          ? `${fix}, then start the run again (no checkpoint was written yet: --force over the same --out, or a new one)`
          : `${fix}, then continue with --resume (the run directory holds checkpoint step-${last})`,
      );
    }
    this.opts.log?.(
      `iteration ${it}: ${failed.length} of ${total} episodes failed and were left out of the batch; first: ${what}`,
    );
  }

  private rolloutStage(engine: PolicyEngine, rows: TaskRow[], it: number) {
    const r = this.cfg.rollout;
    return playRows(engine, engine.tokenizer, this.opts.task, rows, {
      n: r.n,
      temperature: r.temperature,
      topP: r.topP,
      agentSampling: r.agentSampling,
      maxTurns: r.maxTurns,
      maxTokensPerTurn: r.maxTokensPerTurn,
      maxTotalTokens: r.maxTotalTokens,
      compaction: r.compaction,
      seed: this.cfg.train.seed * 1_000_003 + it,
    });
  }

  /** The critic, the reference, the learner's scoring and the judge, as the batch needs them; `rows` are the iteration's. */
  private batchModels(rows: TaskRow[]): BatchModels {
    const judge = this.judge;
    return {
      judge: judge && {
        weight: judge.weight,
        score: (ts: Trajectory[]) => judgeTrajectories(judge, ts, rows, this.engine.tokenizer),
      },
      values: this.critic ? (s: number[][]) => this.critic!.values(s) : undefined,
      refLogprobs: this.reference ? (s: number[][]) => this.reference!.computeLogprobs(s) : undefined,
      teacherLogprobs: this.teacher ? (s: number[][]) => this.teacher!.computeLogprobs(s) : undefined,
      learnerLogprobs:
        this.cfg.loss.tis || this.cfg.loss.offPolicy
          ? (s: number[][]) =>
              this.engine.computeLogprobs(s, {
                temperature: this.cfg.rollout.temperature > 0 ? this.cfg.rollout.temperature : 1,
              })
          : undefined,
    };
  }

  /** Held-out rows, greedy (or sampled) with the current policy. */
  async validate(it: number): Promise<EpisodeSummary> {
    const r = this.cfg.rollout;
    const res = await playRows(this.engine, this.engine.tokenizer, this.opts.task, this.valRows, {
      greedy: this.cfg.train.valGreedy,
      temperature: r.temperature,
      topP: r.topP,
      agentSampling: r.agentSampling,
      maxTurns: r.maxTurns,
      maxTokensPerTurn: r.maxTokensPerTurn,
      maxTotalTokens: r.maxTotalTokens,
      compaction: r.compaction,
      seed: this.cfg.train.seed * 31 + it,
    });
    return res.summary;
  }

  private validationDue(it: number): boolean {
    const every = this.cfg.train.valEvery;
    return this.valRows.length > 0 && every > 0 && (it % every === 0 || it === this.cfg.train.iterations);
  }

  private checkpointDue(it: number): boolean {
    const every = this.cfg.train.checkpointEvery;
    return (every > 0 && it % every === 0) || it === this.cfg.train.iterations;
  }

  private totalSteps(): number {
    return this.cfg.train.iterations * this.cfg.train.ppoEpochs * this.cfg.train.miniBatches;
  }

  private record(it: number, m: IterationMetrics, trajectories: Parameters<typeof decodeTrajectory>[0][]): void {
    appendFileSync(join(this.opts.out, "metrics.jsonl"), JSON.stringify(m) + "\n");
    const k = this.cfg.train.samplesPerIteration;
    if (k > 0) {
      const lines = trajectories.slice(0, k).map((t) => JSON.stringify(decodeTrajectory(t, this.engine.tokenizer)));
      writeFileSync(join(this.opts.out, "samples", `iter-${it}.jsonl`), lines.join("\n") + "\n");
    }
  }

  /** Throws a CheckpointError when the write fails (earlier checkpoints stay as they were). */
  async checkpoint(it: number): Promise<string> {
    return writeCheckpoint(
      this.opts.out,
      it,
      this.state,
      async (dir) => {
        await this.engine.save(join(dir, "policy"));
        if (this.critic) await this.critic.save(join(dir, "critic"));
      },
      this.cfg.train.keepCheckpoints,
    );
  }

  async close(): Promise<void> {
    await this.stopRollouts();
    await this.critic?.dispose();
    await this.reference?.dispose();
    await this.teacher?.dispose();
    await this.engine.dispose();
  }
}

/** The judge reward: given in code or by the recipe's reward.judge (its API key checked now), not both. */
function openJudge(cfg: TrainConfig, given: JudgeReward | undefined): JudgeReward | undefined {
  if (given && cfg.reward.judge)
    throw new InputError("reward.judge: a judge was also given in code (the judge option); give one of them");
  return given ?? (cfg.reward.judge ? judgeReward(cfg.reward.judge, "reward.judge") : undefined);
}

/** Training rows (the task's, or data.train's), and the first valSize validation rows; bad rows fail, or are skipped and noted. */
async function readRows(cfg: TrainConfig, task: Task, notes: string[]): Promise<{ train: TaskRow[]; val: TaskRow[] }> {
  const fromFile = async (file: string) => {
    const r = await readTaskRowsFile(file, { skipBadRows: cfg.data.skipBadRows });
    if (r.rows.length === 0)
      throw new InputError(`${file}: no rows left${r.skipped ? ` (all ${r.skipped} were bad and skipped)` : ""}`);
    const note = skippedRowsNote(file, r);
    if (note) notes.push(note);
    return r.rows;
  };
  const train = cfg.data.train ? await fromFile(cfg.data.train) : task.rows("train");
  if (train.length === 0) throw new InputError(`task '${task.name}' has no training rows`);
  const val = (cfg.data.val ? await fromFile(cfg.data.val) : task.rows("val")).slice(0, cfg.train.valSize);
  return { train, val };
}

/** Where the student's tokenizer.json is: the model directory, else model.tokenizer, else the shipped tokenizer (a preset's). */
function studentTokenizerDir(cfg: TrainConfig): string {
  return cfg.model.path ?? cfg.model.tokenizer ?? defaultTokenizerDir();
}

/** The starting model directory: the configured path, or a preset initialized once inside the run. */
async function baseModel(cfg: TrainConfig, out: string, engines: EngineFactory): Promise<string> {
  if (cfg.model.path) return cfg.model.path;
  if (!cfg.model.preset && cfg.model.tokenizer) return cfg.model.tokenizer; // a remote engine: only its tokenizer is local
  const dir = join(out, "base-model");
  if (!existsSync(join(dir, "config.json")))
    await engines.initModel({
      preset: cfg.model.preset!,
      out: dir,
      tokenizer: cfg.model.tokenizer,
      seed: cfg.train.seed,
    });
  return dir;
}
