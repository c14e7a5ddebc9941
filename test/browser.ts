/**
 * A Chromium for the browser tests, found in this order:
 *  1. env AGENT_R1_CHROMIUM (a Chromium executable);
 *  2. Debian's /usr/bin/chromium (what .ci/run installs);
 *  3. the Chromium that the npm package @sparticuz/chromium ships inside itself (a dev
 *     dependency: no download at run time), with the few shared libraries it also ships,
 *     so that a fresh machine without a system browser still runs the test.
 * Each candidate is launched before it is used; when none starts, the test is skipped with
 * the reasons in one line, except under CI=true, where a missing browser is a failure.
 */
import { existsSync } from "node:fs";
import { chromium, type Browser } from "playwright-core";

export type BrowserLaunch = { browser: Browser; source: string } | { skip: string };

async function tryLaunch(executablePath: string, args: string[]): Promise<Browser | string> {
  try {
    return await chromium.launch({ executablePath, args, timeout: 60_000 });
  } catch (e) {
    return (e instanceof Error ? e.message : String(e)).split("\n")[0];
  }
}

/** The npm-shipped Chromium: unpacked to the temporary directory on first use. */
async function packagedChromium(): Promise<{ path: string; args: string[] } | string> {
  // The package unpacks its own copies of NSS and friends (Amazon Linux 2023 builds) only
  // where it believes it runs on that system; a fresh Debian lacks them too.
  process.env.AWS_LAMBDA_JS_RUNTIME ??= "nodejs20.x";
  try {
    const { default: pkg } = await import("@sparticuz/chromium");
    // Not its own flags, which are made for serverless hosts: with them playwright cannot connect.
    return { path: await pkg.executablePath(), args: ["--no-sandbox"] };
  } catch (e) {
    return `@sparticuz/chromium: ${(e instanceof Error ? e.message : String(e)).split("\n")[0]}`;
  }
}

export async function launchChromium(): Promise<BrowserLaunch> {
  const reasons: string[] = [];
  const system = process.env.AGENT_R1_CHROMIUM || "/usr/bin/chromium";
  if (existsSync(system)) {
    const b = await tryLaunch(system, ["--no-sandbox"]);
    if (typeof b !== "string") return { browser: b, source: system };
    reasons.push(`${system} did not start: ${b}`);
  } else {
    reasons.push(`no Chromium at ${system}`);
  }
  const pkg = await packagedChromium();
  if (typeof pkg === "string") {
    reasons.push(pkg);
  } else {
    const b = await tryLaunch(pkg.path, pkg.args);
    if (typeof b !== "string") return { browser: b, source: "@sparticuz/chromium" };
    reasons.push(`@sparticuz/chromium did not start: ${b}`);
  }
  const why = `no Chromium to run (${reasons.join("; ")}); install Debian's chromium or set AGENT_R1_CHROMIUM`;
  if (process.env.CI === "true") throw new Error(why);
  return { skip: why };
}
