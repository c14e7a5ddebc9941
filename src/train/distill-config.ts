/**
 * The settings of on-policy distillation (`algorithm.distill` in a recipe): one zod schema, and the
 * checks that need the rest of the recipe. The teacher is a local model directory, or a server that
 * scores prompts: vLLM's /v1/completions (echo + logprobs) or a Tinker-protocol server
 * (prompt_logprobs). SGLang is refused: the project's SGLang client reads no input logprobs. The
 * math is in src/rl/distill.ts; opening the teacher and the tokenizer check in src/engine/teacher.ts.
 */
import { z } from "zod";
import { isHttpUrl } from "../rewards/judge-config.js";
import { InputError } from "../util/errors.js";

export const TEACHER_KINDS = ["vllm", "tinker", "sglang"] as const;

const remoteTeacherSchema = z
  .strictObject({
    kind: z
      .enum(TEACHER_KINDS)
      .describe("The server's API: vllm (POST /v1/completions with echo and logprobs) or tinker (prompt_logprobs)."),
    url: z.string().refine(isHttpUrl, { message: "must be an http(s) URL, e.g. http://127.0.0.1:8000" }),
    model: z.string().min(1).describe("The model name the server knows the teacher by."),
    tokenizer: z
      .string()
      .min(1)
      .describe("A local directory with the teacher's tokenizer.json (compared with the student's)."),
  })
  .superRefine((t, ctx) => {
    if (t.kind === "sglang")
      ctx.addIssue({
        code: "custom",
        path: ["kind"],
        message:
          "sglang cannot be a teacher: this project's SGLang client reads no prompt logprobs; use vllm or tinker",
      });
  });

export const distillConfigSchema = z.strictObject({
  teacher: z
    .union([z.string().min(1), remoteTeacherSchema], {
      error: "give a model directory or { kind, url, model, tokenizer }",
    })
    .describe(
      "The teacher: a model directory (scored by a local engine) or { kind: vllm or tinker, url, model, tokenizer } (scored by that server). Its tokenizer.json must equal the student's.",
    ),
  coef: z
    .number()
    .positive()
    .default(1)
    .describe("Scale of the teacher's per-token advantage −coef·(log π_student − log π_teacher)."),
  taskReward: z
    .boolean()
    .default(true)
    .describe(
      "Add the teacher's per-token advantage to the task reward's (the estimator's); false trains on the teacher alone.",
    ),
});

export type DistillConfig = z.infer<typeof distillConfigSchema>;
export type TeacherSpec = DistillConfig["teacher"];

/** What the recipe's other sections must agree with, checked once it parsed; one line naming the field. */
export function checkDistill(
  d: DistillConfig | undefined,
  o: { engineKind: string; needsCritic: boolean; estimator: string },
  source: string,
): void {
  if (!d) return;
  if (typeof d.teacher === "string" && o.engineKind !== "local")
    throw new InputError(
      `${source}: algorithm.distill.teacher: a model directory is scored by a local engine, and engine.kind is ${o.engineKind}; give { kind: tinker, url, model, tokenizer }`,
    );
  if (!d.taskReward && o.needsCritic)
    throw new InputError(
      `${source}: algorithm.distill.taskReward: false trains on the teacher alone, leaving the critic of estimator ${o.estimator} nothing to learn; use a group estimator (grpo)`,
    );
}
