import { Response, type Request } from "miniflare";

/**
 * A fault drill for R2, as `databaseOutage` is one for the database: the Worker's ARTIFACTS binding, wrapped (a
 * Miniflare wrapped binding, loaded into the Worker's own isolate) so that puts can be refused, calls of a kind failed
 * at once as R2 fails them itself, and calls of a kind held unanswered, on demand. Every call asks this process first,
 * so only a host started with the drill pays for it (tests).
 */

/** `{ puts: n, matching? }`: the next n puts (of a value whose bytes contain `matching`, when given) fail; false: none. */
export type StorageOutageMode = false | { puts: number; matching?: string };

/** The R2 calls a hang or a failure can take. */
export type StorageOp = "head" | "get" | "put" | "delete" | "list";

/**
 * Which calls a drill takes: the next `calls` (1) calls of `op` (on a key, or a listing's prefix, that contains `key`,
 * when given), after the first `skip` (0) of them.
 */
interface StorageCalls {
  op: StorageOp;
  calls?: number;
  key?: string;
  skip?: number;
}

/**
 * `{ op, calls?, key?, skip?, afterMs?, onHeld? }`: the calls taken get no answer: never (R2 hung for good), or, with
 * `afterMs`, only after that long, when the call is then made as asked (R2 slow, and applying it late). `onHeld` hears
 * of each call held. false: none.
 */
export type StorageHangMode = false | (StorageCalls & { afterMs?: number; onHeld?: () => void });

/**
 * `{ op, calls?, key?, skip? }`: the calls taken fail at once, made not at all, with the error R2's binding throws for
 * its own internal error (`…: We encountered an internal error. Please try again. (10001)`). false: none.
 */
export type StorageFailureMode = false | StorageCalls;

/** The wrapper's worker name; its own R2 binding reaches the bucket the plain binding would. */
export const STORAGE_DRILL_WORKER = "storage-drill";
export const STORAGE_DRILL_BUCKET = "BUCKET";

/** What the drill answers a call it lets through; any other answer is the message of the error the call throws. */
const PASS = "ok";

// Plain JS for workerd: every R2Bucket call asks the drill first (its op and keys; a put its value's bytes), then is
// passed through, or throws the error the drill names. A stream's bytes are not read (it can be read only once): a
// put of one fails only an outage drill with no `matching`.
const SCRIPT = `
class DrilledBucket {
  constructor(env) { this.inner = env.${STORAGE_DRILL_BUCKET}; this.drill = env.DRILL; }
  async ask(op, keys, body) {
    const verdict = await this.drill.fetch("http://drill/" + op, { method: "POST", headers: { "x-keys": encodeURIComponent(JSON.stringify(keys)) }, body: body ?? "" });
    const said = await verdict.text();
    if (said !== "${PASS}") throw new Error(said);
  }
  async head(key) { await this.ask("head", [key]); return this.inner.head(key); }
  async get(key, options) { await this.ask("get", [key]); return this.inner.get(key, options); }
  async delete(keys) { await this.ask("delete", typeof keys === "string" ? [keys] : keys); return this.inner.delete(keys); }
  async list(options) { await this.ask("list", [options?.prefix ?? ""]); return this.inner.list(options); }
  createMultipartUpload(...a) { return this.inner.createMultipartUpload(...a); }
  resumeMultipartUpload(...a) { return this.inner.resumeMultipartUpload(...a); }
  async put(key, value, options) {
    const bytes = typeof value === "string" || value instanceof ArrayBuffer || ArrayBuffer.isView(value) ? value : "";
    await this.ask("put", [key], bytes);
    return this.inner.put(key, value, options);
  }
}
export default (env) => new DrilledBucket(env);
`;

/** A drill over some calls: `take` says whether this one is taken, counting it off when it is. */
function callsTaken<M extends StorageCalls>() {
  let mode: M | false = false;
  return {
    set: (next: M | false) => void (mode = next),
    take(op: string, keys: string[]): M | null {
      const current = mode;
      if (current === false || current.op !== op) return null;
      const { key } = current;
      if (key !== undefined && !keys.some((k) => k.includes(key))) return null;
      if (current.skip) {
        mode = { ...current, skip: current.skip - 1 };
        return null;
      }
      const calls = current.calls ?? 1;
      mode = calls > 1 ? { ...current, calls: calls - 1 } : false;
      return current;
    },
  };
}

/** The wrapper worker's Miniflare options and the switches that arm it. */
export function storageDrill() {
  let outage: StorageOutageMode = false;
  const hang = callsTaken<Exclude<StorageHangMode, false>>();
  const failure = callsTaken<StorageCalls>();
  const worker = {
    name: STORAGE_DRILL_WORKER,
    modules: true,
    script: SCRIPT,
    r2Buckets: { [STORAGE_DRILL_BUCKET]: "ARTIFACTS" },
    serviceBindings: {
      async DRILL(request: Request) {
        const op = new URL(request.url).pathname.slice(1);
        const keys = JSON.parse(decodeURIComponent(request.headers.get("x-keys") ?? "%5B%5D")) as string[];
        const body = Buffer.from(await request.arrayBuffer());
        const hold = hang.take(op, keys);
        if (hold) {
          hold.onHeld?.();
          // Never: the Worker's call waits on this request for as long as the host lives.
          await new Promise((resolve) => hold.afterMs !== undefined && setTimeout(resolve, hold.afterMs));
        }
        if (failure.take(op, keys)) return new Response(`${op}: We encountered an internal error. Please try again. (10001)`);
        const fail = op === "put" && outage !== false && outage.puts > 0 && (outage.matching === undefined || body.includes(outage.matching));
        if (fail && outage !== false) outage = { ...outage, puts: outage.puts - 1 };
        return new Response(fail ? "put: We encountered an internal error. Please try again. (storage drill)" : PASS);
      },
    },
  };
  return { worker, setOutage: (next: StorageOutageMode) => void (outage = next), setHang: hang.set, setFailure: failure.set };
}
