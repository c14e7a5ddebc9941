#!/usr/bin/env node
/**
 * Build-time probe of binding.gyp: prints which system BLAS the addon can link, one word:
 *   accelerate  on macOS (always there);
 *   openblas    where a C compiler links a program against -lopenblas (libopenblas-dev);
 *   none        otherwise: the addon is built with the project's own kernels only (native/gemm.c).
 * Env AGENT_R1_SYSTEM_BLAS=0 prints none (to build and test the own-kernels-only addon on a
 * machine that has OpenBLAS).
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

function probe() {
  if (process.env.AGENT_R1_SYSTEM_BLAS === "0") return "none";
  if (process.platform === "darwin") return "accelerate";
  const dir = mkdtempSync(join(tmpdir(), "agent-r1-blas-"));
  try {
    const src = join(dir, "probe.c");
    writeFileSync(
      src,
      "extern char *openblas_get_config(void);\nint main(void) { return openblas_get_config() == 0; }\n",
    );
    const cc = process.env.CC || "cc";
    const res = spawnSync(cc, [src, "-o", join(dir, "probe"), "-lopenblas"], { encoding: "utf8", timeout: 60_000 });
    return res.status === 0 ? "openblas" : "none";
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

process.stdout.write(probe());
