/**
 * Progress for long commands: a one-line bar with iteration, ETA and the
 * latest figures on a terminal; plain log lines otherwise (CI, pipes).
 */
export interface ProgressOptions {
  label: string;
  total: number;
  /** Defaults to process.stderr. */
  stream?: NodeJS.WriteStream;
  /** Plain-line mode writes at most one line per this many ms (and always the last unit). Default 5000. */
  lineEveryMs?: number;
}

export class Progress {
  private readonly started = Date.now();
  private readonly stream: NodeJS.WriteStream;
  private readonly tty: boolean;
  private lastLine = -Infinity;
  private open = false;

  constructor(private opts: ProgressOptions) {
    this.stream = opts.stream ?? process.stderr;
    this.tty = Boolean(this.stream.isTTY);
  }

  /** Marks `done` units finished and shows the given figures. */
  update(done: number, figures: Record<string, number | string> = {}): void {
    const elapsed = (Date.now() - this.started) / 1000;
    const eta = done > 0 ? (elapsed / done) * (this.opts.total - done) : NaN;
    const figs = Object.entries(figures)
      .map(([k, v]) => `${k} ${typeof v === "number" ? fmt(v) : v}`)
      .join("  ");
    if (this.tty) {
      this.open = true;
      const width = 24,
        filled = Math.round((width * done) / Math.max(1, this.opts.total));
      const bar = "█".repeat(filled) + "░".repeat(width - filled);
      this.stream.write(
        `\r\x1b[2K${this.opts.label} ${bar} ${done}/${this.opts.total}  ${clock(elapsed)} elapsed, ETA ${clock(eta)}  ${figs}`,
      );
    } else {
      const now = Date.now();
      if (done < this.opts.total && now - this.lastLine < (this.opts.lineEveryMs ?? 5000)) return;
      this.lastLine = now;
      this.stream.write(
        `${this.opts.label} ${done}/${this.opts.total}  elapsed ${clock(elapsed)}  eta ${clock(eta)}  ${figs}\n`,
      );
    }
  }

  /** Ends the bar's line (once; later calls do nothing until the next update). */
  finish(): void {
    if (this.tty && this.open) this.stream.write("\n");
    this.open = false;
  }
}

function fmt(x: number): string {
  if (Number.isInteger(x)) return String(x);
  return Math.abs(x) >= 100 ? x.toFixed(0) : x.toFixed(3);
}

export function clock(seconds: number): string {
  if (!Number.isFinite(seconds)) return "--:--";
  const s = Math.round(seconds);
  const h = Math.floor(s / 3600),
    m = Math.floor((s % 3600) / 60),
    r = s % 60;
  return (h ? `${h}:${String(m).padStart(2, "0")}` : String(m)) + `:${String(r).padStart(2, "0")}`;
}
