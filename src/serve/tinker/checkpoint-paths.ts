/**
 * Where `serve --tinker` keeps checkpoints: <stateDir>/<model_id>/{weights,sampler_weights}/<name>,
 * and the tinker:// paths that name them. Every name is one plain path segment and every directory
 * resolves inside the state directory (no `..`, no link out of it), so no path a client sends can
 * reach another file of the machine.
 */
import { existsSync, lstatSync, readdirSync, realpathSync } from "node:fs";
import { dirname, join, sep } from "node:path";
import { TinkerError } from "../../engine/remote/tinker-error.js";
import { shown } from "../../util/shown.js";

export type CheckpointKind = "weights" | "sampler_weights";

/** Whether `p` exists, links included (a dangling link exists). */
function present(p: string): boolean {
  try {
    lstatSync(p);
    return true;
  } catch {
    return false;
  }
}

/** A name of one path segment: letters, digits, '.', '_', '-', and not only dots. */
function segment(x: string, what: string, where: string): string {
  if (!/^[A-Za-z0-9._-]{1,128}$/.test(x) || /^\.+$/.test(x))
    throw new TinkerError(
      `${where}: ${what} '${shown(x, 40)}' must be letters, digits, '.', '_' and '-' (not only dots)`,
    );
  return x;
}

export class CheckpointPaths {
  /** `stateDir` is a real path (links resolved). */
  constructor(readonly stateDir: string) {}

  /** `dir` (and what is in it) resolves inside the state directory: no `..`, no link out of it. */
  checkInside(dir: string, where: string): void {
    const outside = () => new TinkerError(`${where} leads outside this server's state directory`);
    const inside = (p: string) => p.startsWith(this.stateDir + sep);
    let probe = dir;
    while (!present(probe) && dirname(probe) !== probe) probe = dirname(probe);
    let real: string;
    try {
      real = realpathSync(probe);
    } catch {
      throw outside(); // a dangling link
    }
    if (!(inside(real) || (probe !== dir && real === this.stateDir))) throw outside();
    if (probe !== dir) return;
    for (const entry of readdirSync(dir, { recursive: true }) as string[]) {
      let target: string;
      try {
        target = realpathSync(join(dir, entry));
      } catch {
        throw outside();
      }
      if (!inside(target)) throw outside();
    }
  }

  /** Where a checkpoint of `modelId` named `name` is kept, checked to be inside the state directory. */
  dir(modelId: string, kind: CheckpointKind, name: string, where: string): string {
    const dir = join(this.stateDir, segment(modelId, "the model id", where), kind, segment(name, "the name", where));
    this.checkInside(dir, where);
    return dir;
  }

  /** A tinker:// path of this server, as a directory under the state directory. */
  fromPath(path: string, field: string): string {
    const m = /^tinker:\/\/([^/]+)\/(weights|sampler_weights)\/([^/]+)$/.exec(path);
    if (!m)
      throw new TinkerError(
        `${field} '${shown(path, 200)}' is not tinker://<model_id>/weights/<name> or tinker://<model_id>/sampler_weights/<name>`,
      );
    const dir = this.dir(m[1], m[2] as CheckpointKind, m[3], `${field} '${shown(path, 200)}'`);
    if (!existsSync(join(dir, "config.json")))
      throw new TinkerError(`no checkpoint at ${path} on this server`, undefined, 404);
    return dir;
  }
}
