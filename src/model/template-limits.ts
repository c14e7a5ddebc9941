/**
 * Chat templates with bounded time and memory. A template comes from a model hub, so from a
 * stranger, and it is a program: `{% for i in range(1000000000) %}` asks for a billion-item list
 * and kills the process with a V8 heap OOM that no try/catch sees. So instead of
 * `Template.render` we run @huggingface/jinja's parsed program with an interpreter that
 *  - counts evaluation steps and checks a deadline every CHECK_EVERY steps;
 *  - refuses any string (expression, block, a loop's output so far) or list over a size;
 *  - caps the characters built by all string operations of a render, which bounds what a
 *    template can keep alive;
 * and with our own globals, whose `range` refuses a huge length before allocating.
 * Real chat templates loop over messages and tools only and render in about a millisecond,
 * far from every default below.
 */
import { Environment, Interpreter, type Template } from "@huggingface/jinja";

export interface TemplateLimits {
  /** Wall-clock budget of one render, in milliseconds. */
  timeMs: number;
  /** Longest string (UTF-16 code units) an expression, a block or a loop may produce: the output is one. */
  maxChars: number;
  /** Longest list an expression may produce; `range()` included. */
  maxItems: number;
  /** Characters built by all concatenations, filters and calls of one render. */
  maxBuiltChars: number;
}

export const DEFAULT_TEMPLATE_LIMITS: Readonly<TemplateLimits> = {
  timeMs: 2000,
  maxChars: 4 * 2 ** 20,
  maxItems: 2 ** 20,
  maxBuiltChars: 128 * 2 ** 20,
};

/** A template went past one of its limits; the message names the limit. */
export class TemplateLimitError extends Error {}

export type TemplateProgram = Template["parsed"];
type Statement = { type: string };
type Node = Statement | undefined;
type Value = ReturnType<Interpreter["evaluate"]>;
type ForNode = Statement & { body: Statement[]; defaultBlock: Statement[] };

// The typings mark evaluateBlock private; the runtime calls it (and evaluate) through `this`, so a
// subclass sees every node and every block. (test/model-files.test.ts checks that it does.)
interface OpenInterpreter {
  evaluate(node: Node, env: Environment): Value;
  evaluateBlock(statements: Statement[], env: Environment): Value;
  run(program: TemplateProgram): Value;
}
const OpenInterpreterBase = Interpreter as unknown as new (env: Environment) => OpenInterpreter;

const CHECK_EVERY = 256;
/** Node types whose string result is newly built (the others return a value that already exists). */
const BUILDS = new Set(["BinaryExpression", "FilterExpression", "CallExpression"]);

class BoundedInterpreter extends OpenInterpreterBase {
  private steps = 0;
  private built = 0;
  private readonly deadline: number;
  /** The for loops being run, innermost last, with the characters their bodies produced so far. */
  private readonly loops: { node: ForNode; chars: number }[] = [];

  constructor(
    env: Environment,
    private readonly limits: TemplateLimits,
  ) {
    super(env);
    this.deadline = performance.now() + limits.timeMs;
  }

  override evaluate(node: Node, env: Environment): Value {
    this.tick();
    if (node?.type !== "For") return this.checked(node, super.evaluate(node, env));
    this.loops.push({ node: node as ForNode, chars: 0 });
    try {
      return this.checked(node, super.evaluate(node, env));
    } finally {
      this.loops.pop();
    }
  }

  /** Every node and every block is a step, so an empty loop body counts too. */
  private tick(): void {
    if (++this.steps % CHECK_EVERY === 0 && performance.now() > this.deadline) {
      throw new TemplateLimitError(`rendering ran past the ${this.limits.timeMs} ms limit (${this.steps} steps)`);
    }
  }

  override evaluateBlock(statements: Statement[], env: Environment): Value {
    this.tick();
    const out = super.evaluateBlock(statements, env);
    const n = this.checked(undefined, out).value.length as number;
    this.count(n);
    const loop = this.loops.at(-1);
    if (loop && (statements === loop.node.body || statements === loop.node.defaultBlock)) {
      loop.chars += n;
      if (loop.chars > this.limits.maxChars)
        throw new TemplateLimitError(`a for loop's output passed the ${this.limits.maxChars}-character limit`);
    }
    return out;
  }

  private checked(node: Node, v: Value): Value {
    const x: unknown = v.value;
    if (typeof x === "string") {
      if (x.length > this.limits.maxChars)
        throw new TemplateLimitError(
          `a string of ${x.length} characters is over the ${this.limits.maxChars}-character limit`,
        );
      if (node && BUILDS.has(node.type)) this.count(x.length);
    } else if (Array.isArray(x) && x.length > this.limits.maxItems) {
      throw new TemplateLimitError(`a list of ${x.length} items is over the ${this.limits.maxItems}-item limit`);
    }
    return v;
  }

  private count(chars: number): void {
    this.built += chars;
    if (this.built > this.limits.maxBuiltChars) {
      throw new TemplateLimitError(
        `string operations built over ${this.limits.maxBuiltChars} characters in one render`,
      );
    }
  }
}

/** Runs a parsed template on `items` within `limits`; throws TemplateLimitError past one. */
export function renderBounded(
  program: TemplateProgram,
  items: Record<string, unknown>,
  limits: TemplateLimits = DEFAULT_TEMPLATE_LIMITS,
): string {
  const env = new Environment();
  declareGlobals(env, limits);
  for (const [k, v] of Object.entries(items)) env.set(k, v);
  return new BoundedInterpreter(env, limits).run(program).value as string;
}

/** The globals Hugging Face chat templates expect, with a `range` that checks its length first. */
function declareGlobals(env: Environment, limits: TemplateLimits): void {
  for (const [name, value] of [
    ["false", false],
    ["true", true],
    ["none", null],
  ] as const)
    env.set(name, value);
  env.set("raise_exception", (message?: unknown) => {
    throw new Error(message === undefined ? "" : String(message));
  });
  env.set("range", (a: unknown, b?: unknown, step: unknown = 1) => boundedRange(a, b, step, limits.maxItems));
  env.set("strftime_now", (format: unknown) => strftime(new Date(), String(format)));
  for (const [name, value] of [
    ["True", true],
    ["False", false],
    ["None", null],
  ] as const)
    env.set(name, value);
}

/** Python's range(stop) / range(start, stop[, step]), refusing more than `max` items before allocating any. */
export function boundedRange(a: unknown, b: unknown, step: unknown, max: number): number[] {
  const [start, stop] = b === undefined ? [0, a] : [a, b];
  if (typeof start !== "number" || typeof stop !== "number" || typeof step !== "number")
    throw new Error("range() arguments must be numbers");
  if (step === 0) throw new Error("range() step must not be zero");
  const tooLong = () =>
    new TemplateLimitError(`range() of ${Math.ceil((stop - start) / step)} items is over the ${max}-item limit`);
  if (Math.ceil((stop - start) / step) > max) throw tooLong();
  // The loop of the library's range (float steps included), with the count checked as it goes.
  const out: number[] = [];
  for (let x = start; step > 0 ? x < stop : x > stop; x += step) {
    if (out.push(x) > max) throw tooLong();
  }
  return out;
}

const MONTHS = [
  "January",
  "February",
  "March",
  "April",
  "May",
  "June",
  "July",
  "August",
  "September",
  "October",
  "November",
  "December",
];

/** The strftime subset chat templates use (Llama 3.1: "%d %b %Y"): %Y %m %d %b %B %H %M %%, local time, English months (Python's C locale); other codes stay as written. */
export function strftime(d: Date, format: string): string {
  const two = (n: number) => String(n).padStart(2, "0");
  const codes: Record<string, () => string> = {
    Y: () => String(d.getFullYear()),
    m: () => two(d.getMonth() + 1),
    d: () => two(d.getDate()),
    b: () => MONTHS[d.getMonth()].slice(0, 3),
    B: () => MONTHS[d.getMonth()],
    H: () => two(d.getHours()),
    M: () => two(d.getMinutes()),
    "%": () => "%",
  };
  return format.replace(/%(.)/gs, (code, c: string) => (Object.hasOwn(codes, c) ? codes[c]() : code));
}
