/** The experiments' command lines: a missing argument prints the usage line and exits 2, as the CLI does. */
export function usage(line: string, problem: string): never {
  process.stderr.write(`${problem}\nusage: ${line}\n`);
  process.exit(2);
}

/** `value`, or the usage line when it is missing. */
export function required(value: string | undefined, name: string, line: string): string {
  if (value === undefined || value === "") usage(line, `missing ${name}`);
  return value;
}
