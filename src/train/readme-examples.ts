/**
 * README code blocks that mirror example files: a block opened by
 * `<!-- example: PATH -->` holds PATH's text verbatim (the test suite compiles
 * and runs the files, and test/readme.test.ts keeps the blocks equal to them).
 */
const BLOCK = /<!-- example: (\S+) -->\n```ts\n([\s\S]*?)```/g;

/** Each example block of a README: the file it mirrors and the code it holds. */
export function readmeExamples(readme: string): { path: string; code: string }[] {
  return [...readme.matchAll(BLOCK)].map((m) => ({ path: m[1], code: m[2] }));
}

/** The README with every example block replaced by `read(path)`. */
export function refreshReadmeExamples(readme: string, read: (path: string) => string): string {
  return readme.replace(BLOCK, (_, path: string) => `<!-- example: ${path} -->\n\`\`\`ts\n${read(path)}\`\`\``);
}
