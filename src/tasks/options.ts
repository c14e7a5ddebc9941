/** Task options: parsed once, at the edge, with the task's own zod schema; errors name the option and the allowed ones. */
import { z } from "zod";
import { InputError } from "../util/errors.js";

export function parseTaskOptions<S extends z.ZodObject>(
  task: string,
  schema: S,
  options: Record<string, unknown>,
): z.output<S> {
  const allowed = Object.keys(schema.shape);
  const list = allowed.join(", ");
  if (typeof options !== "object" || options === null || Array.isArray(options)) {
    throw new InputError(`task '${task}': options must be an object of { name: value }`, `allowed options: ${list}`);
  }
  for (const key of Object.keys(options)) {
    if (!allowed.includes(key))
      throw new InputError(`task '${task}': unknown option '${key}'; allowed options: ${list}`);
  }
  const parsed = schema.safeParse(options);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new InputError(
      `task '${task}': option '${issue.path.join(".")}': ${issue.message}`,
      `allowed options: ${list}`,
    );
  }
  return parsed.data;
}

const size = (n: number) => z.number().int().min(0).max(100_000).default(n);

/** The options every generated task has: the generator's seed and the question count of each split. */
export function generatedSplitOptions(trainDefault: number) {
  return { seed: z.number().int().default(0), train: size(trainDefault), val: size(64), test: size(64) };
}
