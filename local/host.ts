import { Miniflare } from "miniflare";
import { randomBytes } from "node:crypto";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import type { Readable } from "node:stream";
import { answeredWithin } from "./answered-within";
import { buildWorker, bundleModules } from "./build";
import { listenForWorker, type OutageMode } from "./db-listener";
import { openEmbeddedDb } from "./libsql";
import { STORAGE_DRILL_BUCKET, STORAGE_DRILL_WORKER, storageDrill, type StorageFailureMode, type StorageHangMode, type StorageOutageMode } from "./storage-drill";

/** The runtime the Worker is written for: as wrangler.toml says for production (a unit test keeps them equal). */
export const COMPATIBILITY_DATE = "2026-04-01";
export const COMPATIBILITY_FLAGS = ["enable_request_signal"] as const;

export interface HostOptions {
  adminToken: string;
  /** 0 picks a free port. */
  port?: number;
  /** Persist DO storage, R2 and the libSQL file under this folder; omit for an ephemeral host (tests). */
  dataDir?: string;
  /** libSQL URL when no dataDir is given (default: a file in a temp folder the caller owns is better than :memory:). */
  dbUrl?: string;
  /** Extra Worker vars (RUN_DEADLINE_MS, RUNNER_MAX_LINE_BYTES, ...). */
  vars?: Record<string, string>;
  /** Reuse a bundle already built (tests build once). */
  scriptPath?: string;
  /** Open workerd's V8 inspector on this port (CPU profiles of the Worker: `npm run bench:profile`). */
  inspectorPort?: number;
  /** Receives the Worker's stdout and stderr (console output) instead of this process's streams. */
  onRuntimeOutput?: (text: string) => void;
  /**
   * workerd's `--verbose`: it also logs at INFO, among them each uncaught exception (`uncaught exception; source =
   * …`), which it otherwise reports only to an attached inspector (tests that assert there is none).
   */
  verbose?: boolean;
  /** The caller stops the host on SIGINT/SIGTERM itself: Miniflare's own handlers (kill workerd, exit 128 + signal) are removed. */
  ownSignals?: boolean;
  /** A fault drill from the Worker's first query on (see `databaseOutage`): what a restarted instance does first meets it. */
  outage?: OutageMode;
  /** Wrap the Worker's R2 binding so `storageOutage` can fail its puts, `storageFailure` its calls of a kind and `storageHang` hold them (tests: each call then asks this process first). */
  storageDrill?: boolean;
  /** How long an R2 inspection (`r2Object`, `r2Keys`, `r2Put`, `r2Delete`) waits for workerd (default INSPECTION_TIMEOUT_MS). */
  inspectionTimeoutMs?: number;
}

/** Far above what the largest R2 read a test makes takes on a starved machine (12 MiB: 2-3 s), far below a test's timeout. */
export const INSPECTION_TIMEOUT_MS = 30_000;

export interface LocalHost {
  url: string;
  adminToken: string;
  /** The bytes stored in R2 under `key` (inspection for tests and operators). Every R2 inspection rejects with a NoAnswerError if workerd does not answer within `inspectionTimeoutMs`. */
  r2Object(key: string): Promise<Uint8Array | null>;
  /** The R2 keys under `prefix` (inspection). */
  r2Keys(prefix: string): Promise<string[]>;
  /** Remove an R2 object (fault drills and tests: a file gone while it is delivered). */
  r2Delete(key: string): Promise<void>;
  /** Write an R2 object (tests: one as an earlier release stored it). */
  r2Put(key: string, body: string, contentType?: string): Promise<void>;
  /** Rows of a read query on the embedded database (inspection). */
  query<T = Record<string, unknown>>(sql: string, args?: (string | number | null)[]): Promise<T[]>;
  /** Make the database unreachable for the Worker (every query fails, or with "hang" never answers) until called with false, or fail only the next `{ queries: n }`: fault drills and tests. */
  databaseOutage(mode: OutageMode): void;
  /** Fail the Worker's next R2 puts (only on a host started with `storageDrill`). */
  storageOutage(mode: StorageOutageMode): void;
  /** Leave the Worker's next R2 calls of a kind unanswered, for good or for a while (only on a host started with `storageDrill`). */
  storageHang(mode: StorageHangMode): void;
  /** Fail the Worker's next R2 calls of a kind at once, as R2 fails them itself (only on a host started with `storageDrill`). */
  storageFailure(mode: StorageFailureMode): void;
  /** Fire the Worker's cron handler once, as the platform would; `scheduledTime` defaults to now. */
  triggerScheduled(opts?: { cron?: string; scheduledTime?: Date }): Promise<void>;
  dispose(): Promise<void>;
}

/**
 * The local embedded default: the real Worker under Miniflare (workerd), its
 * Durable Objects and R2 persisted under `dataDir`, and the libSQL file opened
 * here in Node and reached from the Worker through the LIBSQL service binding.
 */
export async function startHost(opts: HostOptions): Promise<LocalHost> {
  const scriptPath = opts.scriptPath ?? (await buildWorker());
  if (opts.dataDir) mkdirSync(opts.dataDir, { recursive: true });
  const dbUrl = opts.dataDir ? `file:${join(opts.dataDir, "host.db")}` : (opts.dbUrl ?? ":memory:");
  const embedded = await openEmbeddedDb(dbUrl);
  const dbToken = randomBytes(24).toString("hex");
  const listener = await listenForWorker(embedded.executor, dbToken);
  if (opts.outage !== undefined) listener.setOutage(opts.outage);
  const signalsBefore = new Map((["SIGINT", "SIGTERM"] as const).map((s) => [s, process.listeners(s)]));
  const drill = opts.storageDrill ? storageDrill() : null;
  const worker = {
    ...bundleModules(scriptPath),
    compatibilityDate: COMPATIBILITY_DATE,
    compatibilityFlags: [...COMPATIBILITY_FLAGS],
    // SQLite-backed, as `new_sqlite_classes` in wrangler.toml makes it in production.
    durableObjects: { CONVERSATIONS: { className: "ConversationDO", useSQLite: true } },
    ...(drill ? { wrappedBindings: { ARTIFACTS: STORAGE_DRILL_WORKER } } : { r2Buckets: ["ARTIFACTS"] }),
    serviceBindings: { LIBSQL: { external: { address: listener.address, http: {} } } },
    bindings: { ADMIN_TOKEN: opts.adminToken, LIBSQL_BINDING_TOKEN: dbToken, ...opts.vars },
  };
  const mf = new Miniflare({
    host: "127.0.0.1",
    port: opts.port ?? 0,
    ...(opts.inspectorPort ? { inspectorPort: opts.inspectorPort } : {}),
    ...(opts.verbose ? { verbose: true } : {}),
    durableObjectsPersist: opts.dataDir ? join(opts.dataDir, "do") : false,
    r2Persist: opts.dataDir ? join(opts.dataDir, "r2") : false,
    ...(opts.onRuntimeOutput ? { handleRuntimeStdio: captureStdio(opts.onRuntimeOutput) } : {}),
    workers: drill ? [worker, drill.worker] : [worker],
  });
  // With the drill, the bucket is bound only to the wrapper.
  const bucket = () => (drill ? mf.getR2Bucket(STORAGE_DRILL_BUCKET, STORAGE_DRILL_WORKER) : mf.getR2Bucket("ARTIFACTS"));
  if (opts.ownSignals) {
    // Miniflare's exit hook added them in its constructor; its "exit" hook (workerd killed on exit) stays.
    for (const signal of ["SIGINT", "SIGTERM"] as const) for (const l of process.listeners(signal)) if (!signalsBefore.get(signal)!.includes(l)) process.removeListener(signal, l);
  }
  const url = (await mf.ready).origin;
  // Miniflare's proxy calls have no timeout: a workerd that stops answering (seen under CPU starvation, its event loop
  // spinning) held a test's R2 read until the test's own timeout, with nothing to say why. Only the first call of each
  // method cannot be cut short: Miniflare makes it synchronously (Atomics.wait), the later ones are asynchronous.
  const inspect = <T>(what: string, call: () => Promise<T>) => answeredWithin(call(), opts.inspectionTimeoutMs ?? INSPECTION_TIMEOUT_MS, what);
  return {
    url,
    adminToken: opts.adminToken,
    r2Object: (key) =>
      inspect(`R2 read of ${key}`, async () => {
        const object = await (await bucket()).get(key);
        return object ? new Uint8Array(await object.arrayBuffer()) : null;
      }),
    r2Delete: (key) => inspect(`R2 delete of ${key}`, async () => void (await (await bucket()).delete(key))),
    r2Put: (key, body, contentType) => inspect(`R2 put of ${key}`, async () => void (await (await bucket()).put(key, body, contentType ? { httpMetadata: { contentType } } : undefined))),
    r2Keys: (prefix) =>
      inspect(`R2 listing of ${prefix}`, async () => {
        const r2 = await bucket();
        const keys: string[] = [];
        for (let cursor: string | undefined; ; ) {
          const page = await r2.list({ prefix, cursor });
          keys.push(...page.objects.map((o) => o.key));
          if (!page.truncated) return keys;
          cursor = page.cursor;
        }
      }),
    databaseOutage: (mode) => listener.setOutage(mode),
    storageOutage(mode) {
      if (!drill) throw new Error("storageOutage needs a host started with storageDrill");
      drill.setOutage(mode);
    },
    storageHang(mode) {
      if (!drill) throw new Error("storageHang needs a host started with storageDrill");
      drill.setHang(mode);
    },
    storageFailure(mode) {
      if (!drill) throw new Error("storageFailure needs a host started with storageDrill");
      drill.setFailure(mode);
    },
    async query<T>(sql: string, args: (string | number | null)[] = []) {
      return embedded.rows<T>(sql, args);
    },
    async triggerScheduled({ cron = "17 * * * *", scheduledTime = new Date() } = {}) {
      // workerd's Fetcher has scheduled(); the workers-types Fetcher type does not declare it.
      const worker = (await mf.getWorker()) as unknown as { scheduled(o: { cron: string; scheduledTime: Date }): Promise<{ outcome: string }> };
      const result = await worker.scheduled({ cron, scheduledTime });
      if (result.outcome !== "ok") throw new ScheduledOutcomeError(result.outcome);
    },
    async dispose() {
      await mf.dispose();
      await listener.close();
      embedded.close();
    },
  };
}

/** The cron handler ran and did not end "ok": `exception` when it threw (the Worker logs why itself, src/index.ts). */
export class ScheduledOutcomeError extends Error {
  override readonly name = "ScheduledOutcomeError";
  constructor(readonly outcome: string) {
    super(`scheduled handler ended with outcome ${outcome}`);
  }
}

/**
 * Both of workerd's output streams, as text, to one callback, in whole lines: a chunk read from a pipe may end
 * anywhere (within a line, within a character), and a line one stream was cut in must never be joined by the other's
 * (a run's warning on stderr read into a decision line on stdout, and filtered out with it). Each stream's lines are
 * put together on their own; what is left when it ends is passed on as it is.
 */
export function captureStdio(onText: (text: string) => void) {
  return (stdout: Readable, stderr: Readable) => {
    for (const stream of [stdout, stderr]) {
      let partial = "";
      stream.setEncoding("utf8");
      stream.on("data", (text: string) => {
        const end = text.lastIndexOf("\n");
        if (end < 0) return void (partial += text);
        onText(partial + text.slice(0, end + 1));
        partial = text.slice(end + 1);
      });
      stream.on("end", () => {
        if (partial) onText(partial);
      });
    }
  };
}

/** How each Host API decision line (src/host-api/decision-log.ts) starts. */
export const DECISION_LINE = '{"log":"host_api.decision"';
/** How each run's end line (src/run/end-log.ts) starts. */
export const RUN_ENDED_LINE = '{"log":"run.ended"';
/** The end lines still shown: a run that failed or timed out, as the host's text line for those was. */
const SHOWN_ENDS = [`${RUN_ENDED_LINE},"status":"failed"`, `${RUN_ENDED_LINE},"status":"timeout"`];

/** A line every call or run makes: a decision, or a run's end that is not a failure. */
const isRoutine = (line: string) => line.startsWith(DECISION_LINE) || (line.startsWith(RUN_ENDED_LINE) && !SHOWN_ENDS.some((shown) => line.startsWith(shown)));

/** Forwards whole lines of the Worker's output, less the routine ones (§8 decisions, runs that ended well). */
export function withoutRoutineLines(write: (text: string) => void) {
  let partial = "";
  return (text: string) => {
    const lines = (partial + text).split("\n");
    partial = lines.pop()!;
    const kept = lines.filter((line) => !isRoutine(line));
    if (kept.length) write(`${kept.join("\n")}\n`);
  };
}
