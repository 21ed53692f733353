import { Response, type Request } from "miniflare";

/**
 * A fault drill for R2, as `databaseOutage` is one for the database: the Worker's ARTIFACTS binding, wrapped (a
 * Miniflare wrapped binding, loaded into the Worker's own isolate) so that puts can be refused on demand. Every put
 * asks this process first whether to fail, so only a host started with the drill pays for it (tests).
 */

/** `{ puts: n, matching? }`: the next n puts (of a value whose bytes contain `matching`, when given) fail; false: none. */
export type StorageOutageMode = false | { puts: number; matching?: string };

/** The wrapper's worker name; its own R2 binding reaches the bucket the plain binding would. */
export const STORAGE_DRILL_WORKER = "storage-drill";
export const STORAGE_DRILL_BUCKET = "BUCKET";

// Plain JS for workerd: every R2Bucket method is passed through; `put` asks the drill first. A stream's bytes are
// not read (it can be read only once): it fails only a drill with no `matching`.
const SCRIPT = `
class DrilledBucket {
  constructor(env) { this.inner = env.${STORAGE_DRILL_BUCKET}; this.drill = env.DRILL; }
  head(...a) { return this.inner.head(...a); }
  get(...a) { return this.inner.get(...a); }
  delete(...a) { return this.inner.delete(...a); }
  list(...a) { return this.inner.list(...a); }
  createMultipartUpload(...a) { return this.inner.createMultipartUpload(...a); }
  resumeMultipartUpload(...a) { return this.inner.resumeMultipartUpload(...a); }
  async put(key, value, options) {
    const bytes = typeof value === "string" || value instanceof ArrayBuffer || ArrayBuffer.isView(value) ? value : "";
    const verdict = await this.drill.fetch("http://drill/put", { method: "POST", body: bytes });
    if ((await verdict.text()) === "fail") throw new Error("put: We encountered an internal error. Please try again. (storage drill)");
    return this.inner.put(key, value, options);
  }
}
export default (env) => new DrilledBucket(env);
`;

/** The wrapper worker's Miniflare options and the switch that arms it. */
export function storageDrill() {
  let mode: StorageOutageMode = false;
  const worker = {
    name: STORAGE_DRILL_WORKER,
    modules: true,
    script: SCRIPT,
    r2Buckets: { [STORAGE_DRILL_BUCKET]: "ARTIFACTS" },
    serviceBindings: {
      async DRILL(request: Request) {
        const body = Buffer.from(await request.arrayBuffer());
        const fail = mode !== false && mode.puts > 0 && (mode.matching === undefined || body.includes(mode.matching));
        if (fail && mode !== false) mode = { ...mode, puts: mode.puts - 1 };
        return new Response(fail ? "fail" : "ok");
      },
    },
  };
  return { worker, setOutage: (next: StorageOutageMode) => void (mode = next) };
}
