/**
 * A safe arithmetic evaluator with its own parser (never eval / Function).
 * Grammar (usual precedence, left-associative binary operators):
 *   expr   = term (("+" | "-") term)*
 *   term   = unary (("*" | "/") unary)*
 *   unary  = ("-" | "+") unary | primary
 *   primary = number | "(" expr ")"
 *   number = digits ["." digits] | "." digits
 * Anything else (identifiers, `**`, exponents like 1e9, `;`, commas) is refused
 * with the character and position. Guards: at most MAX_EXPRESSION_CHARS
 * characters, MAX_DEPTH nested parentheses / signs, MAX_DIGITS digits per
 * number; division by zero and non-finite results are errors.
 */
import { InputError } from "../../util/errors.js";

export const MAX_EXPRESSION_CHARS = 200;
export const MAX_DEPTH = 20;
export const MAX_DIGITS = 15;

type Token = { kind: "num"; value: number; at: number } | { kind: "op"; op: string; at: number };

function tokenize(src: string): Token[] {
  const tokens: Token[] = [];
  const number = /\d+(?:\.\d+)?|\.\d+/y;
  for (let at = 0; at < src.length;) {
    const c = src[at];
    if (c === " " || c === "\t" || c === "\n") {
      at++;
      continue;
    }
    if ("+-*/()".includes(c)) {
      tokens.push({ kind: "op", op: c, at: at++ });
      continue;
    }
    number.lastIndex = at;
    const m = number.exec(src);
    if (!m) {
      const shown = JSON.stringify(String.fromCodePoint(src.codePointAt(at)!));
      throw new InputError(`unexpected ${shown} at position ${at}: only numbers, + - * / and parentheses are allowed`);
    }
    if (m[0].replace(".", "").length > MAX_DIGITS)
      throw new InputError(`number at position ${at} has more than ${MAX_DIGITS} digits`);
    tokens.push({ kind: "num", value: Number(m[0]), at });
    at += m[0].length;
  }
  return tokens;
}

function parse(tokens: Token[]): number {
  let i = 0;
  let depth = 0;
  const peek = (): string | undefined => {
    const t = tokens[i];
    return t?.kind === "op" ? t.op : undefined;
  };
  const where = () => (i < tokens.length ? `position ${tokens[i].at}` : "the end");
  const nest = <T>(f: () => T): T => {
    if (++depth > MAX_DEPTH) throw new InputError(`expression nests deeper than ${MAX_DEPTH} levels`);
    const v = f();
    depth--;
    return v;
  };
  const primary = (): number => {
    const t = tokens[i];
    if (t?.kind === "num") return (i++, t.value);
    if (peek() === "(") {
      i++;
      const v = nest(expr);
      if (peek() !== ")") throw new InputError(`expected ')' at ${where()}`);
      i++;
      return v;
    }
    throw new InputError(`expected a number or '(' at ${where()}`);
  };
  const unary = (): number => {
    const op = peek();
    if (op === "-" || op === "+") return (i++, nest(() => (op === "-" ? -unary() : unary())));
    return primary();
  };
  const term = (): number => {
    let v = unary();
    for (let op = peek(); op === "*" || op === "/"; op = peek()) {
      i++;
      const r = unary();
      if (op === "/" && r === 0) throw new InputError("division by zero");
      v = op === "*" ? v * r : v / r;
    }
    return v;
  };
  function expr(): number {
    let v = term();
    for (let op = peek(); op === "+" || op === "-"; op = peek()) {
      i++;
      v = op === "+" ? v + term() : v - term();
    }
    return v;
  }
  if (tokens.length === 0) throw new InputError("the expression is empty");
  const v = expr();
  if (i < tokens.length) {
    const t = tokens[i];
    throw new InputError(
      `unexpected ${t.kind === "op" ? `'${t.op}'` : "number"} at ${where()}: expected an operator or the end`,
    );
  }
  if (!Number.isFinite(v)) throw new InputError(`the result is too large (over ${Number.MAX_VALUE.toExponential(1)})`);
  return v;
}

export function evaluateArithmetic(expression: string): number {
  if (expression.length > MAX_EXPRESSION_CHARS) {
    throw new InputError(`the expression is ${expression.length} characters; the limit is ${MAX_EXPRESSION_CHARS}`);
  }
  return parse(tokenize(expression));
}

/**
 * How results are written back: integers below 1e15 as digits ("59", "-3"),
 * anything else rounded to 12 significant digits with float noise removed
 * (0.1 + 0.2 -> "0.3", 1 / 3 -> "0.333333333333"); -0 is "0".
 */
export function formatNumber(v: number): string {
  if (Object.is(v, -0)) return "0";
  if (Number.isInteger(v) && Math.abs(v) < 1e15) return String(v);
  return String(Number(v.toPrecision(12)));
}
