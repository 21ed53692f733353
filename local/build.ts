import { build } from "esbuild";
import { mkdirSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");

/** Bundle the Worker the way wrangler would: one ES module for workerd. */
export async function buildWorker(outDir = join(ROOT, "dist")): Promise<string> {
  mkdirSync(outDir, { recursive: true });
  const outfile = join(outDir, "worker.js");
  await build({
    entryPoints: [join(ROOT, "src/index.ts")],
    outfile,
    bundle: true,
    format: "esm",
    platform: "neutral",
    target: "es2022",
    conditions: ["workerd", "worker", "browser"],
    mainFields: ["browser", "module", "main"],
    external: ["cloudflare:*"],
    sourcemap: "linked",
    logLevel: "warning",
  });
  return outfile;
}
