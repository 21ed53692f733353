import { Miniflare } from "miniflare";
import { join } from "node:path";
import type { Readable } from "node:stream";
import { bundleModules, ROOT } from "../../local/build";
import { COMPATIBILITY_DATE, COMPATIBILITY_FLAGS } from "../../local/host";

/**
 * The test bundle under workerd as wrangler.toml deploys it: no LIBSQL service binding (the database is reached by
 * `LIBSQL_URL`, src/db/connect.ts), SQLite-backed conversation objects, one R2 bucket, and `bindings` as the
 * Worker's variables.
 */
export function productionWorker(bindings: Record<string, string>, extra: { handleRuntimeStdio?: (stdout: Readable, stderr: Readable) => void } = {}): Miniflare {
  return new Miniflare({
    host: "127.0.0.1",
    port: 0,
    ...bundleModules(join(ROOT, "dist/test/worker.js")),
    compatibilityDate: COMPATIBILITY_DATE,
    compatibilityFlags: [...COMPATIBILITY_FLAGS],
    durableObjects: { CONVERSATIONS: { className: "ConversationDO", useSQLite: true } },
    r2Buckets: ["ARTIFACTS"],
    bindings,
    ...extra,
  });
}
