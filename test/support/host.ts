import { createClient, type Client, type InArgs } from "@libsql/client";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ROOT } from "../../local/build";
import { DECISION_LINE, RUN_ENDED_LINE, startHost, withoutRoutineLines, type HostOptions, type LocalHost } from "../../local/host";
import { adminCall, bindRunner } from "../../local/setup";

export const ADMIN_TOKEN = "test-admin-token-0123456789abcdef";
/** Every test host seals stored credentials, as `npm start` does. */
export const SECRETS_KEY = Buffer.alloc(32, 7).toString("base64");
/**
 * Test hosts retry the database sooner than production (5 s; 0.2, 1 and 3 s): the same retries in the same order,
 * less of the suite spent waiting them out. A test about the production schedule sets its own.
 */
export const QUICK_DB_RETRIES = { DB_RETRY_PAUSE_MS: "1000", DB_WRITE_RETRY_PAUSES_MS: "100,300,600" };
const TERMINAL = new Set(["completed", "failed", "cancelled", "timeout"]);

/** Polls a run on any local host (one a test restarts too) until it has ended. */
export async function waitForRunOn(host: LocalHost, runId: string, timeoutMs = 15_000): Promise<RunView> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const res = await adminCall<RunView>(host, "GET", `/v1/runs/${runId}`);
    if (res.status === 200 && TERMINAL.has(res.body.status)) return res.body;
    if (Date.now() > until) throw new Error(`run ${runId} did not end in ${timeoutMs} ms: ${JSON.stringify(res.body)}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

export interface RunView {
  run_id: string;
  status: string;
  message?: { role: string; content: unknown };
  error?: { code: string; message: string };
  [k: string]: unknown;
}

export interface TestHost extends LocalHost {
  admin<T = any>(method: string, path: string, body?: unknown): Promise<{ status: number; body: T }>;
  postEvent(body: Record<string, unknown>): Promise<{ status: number; body: { event_id: string; run_id: string | null; disposition: string; error?: { code: string; message: string; details?: unknown } } }>;
  waitForRun(runId: string, timeoutMs?: number): Promise<RunView>;
  bind(opts: Parameters<typeof bindRunner>[1]): Promise<boolean>;
  /** Everything the Worker printed so far (only with `captureLogs`). */
  logs(): string;
  /** The §8 decision lines the Worker logged so far for a run (only with `captureLogs`). */
  decisions(runId: string): Record<string, any>[];
  /** Read the host's libSQL file directly (facts the API does not list, e.g. audit records). */
  query<T = Record<string, unknown>>(sql: string, args?: InArgs): Promise<T[]>;
}

/**
 * A host on `dataDir`, which a test may stop and start again on it (a restart, a deploy): the built Worker, `vars`
 * over the test defaults, `more` over the rest.
 */
export function startHostOn(dataDir: string, vars: Record<string, string> = {}, more: Partial<HostOptions> = {}): Promise<LocalHost> {
  return startHost({ adminToken: ADMIN_TOKEN, dataDir, scriptPath: join(ROOT, "dist/test/worker.js"), vars: { ...QUICK_DB_RETRIES, ...vars }, ...more });
}

/** A real host: the built Worker under Miniflare with a fresh libSQL file of its own. */
export async function startTestHost(opts: { vars?: Record<string, string>; captureLogs?: boolean; storageDrill?: boolean; verbose?: boolean } = {}): Promise<TestHost> {
  const dir = mkdtempSync(join(tmpdir(), "agent-host-test-"));
  let logs = "";
  const dbUrl = `file:${join(dir, "host.db")}`;
  let reader: Client | undefined;
  const host = await startHost({
    adminToken: ADMIN_TOKEN,
    dbUrl,
    scriptPath: join(ROOT, "dist/test/worker.js"),
    vars: { SECRETS_KEY, ...QUICK_DB_RETRIES, ...opts.vars },
    storageDrill: opts.storageDrill,
    verbose: opts.verbose,
    // Routine lines (a decision per Host API call, an end per run that did not fail) stay out of the test output;
    // everything else the Worker prints reaches it, unless the test captures it all to read.
    onRuntimeOutput: opts.captureLogs ? (text: string) => (logs += text) : withoutRoutineLines((text) => process.stdout.write(text)),
  });
  const admin = <T>(method: string, path: string, body?: unknown) => adminCall<T>(host, method, path, body);
  return {
    ...host,
    admin,
    postEvent: (body) => admin("POST", "/v1/events", body),
    bind: (o) => bindRunner(host, o),
    logs: () => logs,
    decisions: (runId) =>
      logs
        .split("\n")
        .filter((line) => line.startsWith(DECISION_LINE))
        .map((line) => JSON.parse(line))
        .filter((d) => d.run_id === runId),
    async query<T>(sql: string, args: InArgs = []) {
      reader ??= createClient({ url: dbUrl });
      return (await reader.execute({ sql, args })).rows as unknown as T[];
    },
    waitForRun: (runId, timeoutMs) => waitForRunOn(host, runId, timeoutMs),
    async dispose() {
      reader?.close();
      await host.dispose();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** The run.ended lines (src/run/end-log.ts) of a run in a Worker's captured output, parsed. */
export function runEndedLines(logs: string, runId: string): Record<string, unknown>[] {
  return logs
    .split("\n")
    .filter((line) => line.startsWith(RUN_ENDED_LINE))
    .map((line) => JSON.parse(line) as Record<string, unknown>)
    .filter((line) => line.run_id === runId);
}

/** The JSON lines named `name` (`{"log":"webhook.refused",…}`, `{"log":"delivery.failed",…}`) in a Worker's captured output, parsed. */
export function namedLogLines(logs: string, name: string): Record<string, any>[] {
  const start = `{"log":${JSON.stringify(name)},`;
  return logs
    .split("\n")
    .filter((line) => line.startsWith(start))
    .map((line) => JSON.parse(line) as Record<string, any>);
}

export function messageEvent(conversationId: string, text: string, extra: Record<string, unknown> = {}) {
  return {
    event_type: "message.received",
    conversation_id: conversationId,
    actor: { actor_type: "user", actor_id: "u1" },
    input: { text },
    ...extra,
  };
}

/** Read an SSE response to its end: the `result` frames and the final `end` status. */
/**
 * A run as ingress leaves it when its hand-over to the conversation's object is lost: a first event runs
 * (with `text`), then a second run row for it is recorded `created` and named by the event, as if that
 * hand-over had failed. A redelivery of `eventId` then hands it over. Answers the lost run's id.
 */
export async function unhandedRun(host: TestHost, conv: string, eventId: string, text = "first"): Promise<string> {
  const first = await host.postEvent(messageEvent(conv, text, { event_id: eventId }));
  await host.waitForRun(first.body.run_id!);
  // Same object: the run id's prefix names it.
  const lost = first.body.run_id!.replace(/_[^_]+$/, `_lost${eventId.replace(/\W/g, "")}`);
  // Every column ingress writes is copied (whatever the schema holds), the outcome's left out.
  const outcome = new Set(["run_id", "status", "finish_reason", "final_message_json", "error_code", "error_message", "result_count", "started_at", "ended_at"]);
  const copied = (await host.query<{ name: string }>("SELECT name FROM pragma_table_info('run')")).map((c) => c.name).filter((c) => !outcome.has(c));
  await host.query(`INSERT INTO run (run_id, status, ${copied.join(", ")}) SELECT ?, 'created', ${copied.join(", ")} FROM run WHERE run_id = ?`, [lost, first.body.run_id!]);
  await host.query("UPDATE event_log SET run_id = ? WHERE event_id = ?", [lost, eventId]);
  return lost;
}

export async function readSse(res: Response): Promise<{ frames: { seq: number; type: string; data: any; origin: string }[]; end?: string }> {
  const text = await res.text();
  const frames: { seq: number; type: string; data: any; origin: string }[] = [];
  let end: string | undefined;
  for (const block of text.split("\n\n")) {
    const event = /^event: (.*)$/m.exec(block)?.[1];
    const data = /^data: (.*)$/m.exec(block)?.[1];
    if (!data) continue;
    if (event === "result") frames.push(JSON.parse(data));
    if (event === "end") end = JSON.parse(data).status;
  }
  return { frames, end };
}

/** What a run's answer is recorded as, in its ledger's `message.completed` and its assistant Transcript item: the runner's text as sent, whatever the chat was shown. */
export async function recordedAnswer(host: TestHost, runId: string): Promise<{ ledger: string; transcript: string }> {
  const [ledger] = await host.query<{ data_json: string }>("SELECT data_json FROM run_event WHERE run_id = ? AND type = 'message.completed'", [runId]);
  const [item] = await host.query<{ content: string }>("SELECT content FROM transcript WHERE run_id = ? AND role = 'assistant'", [runId]);
  return { ledger: JSON.parse(ledger.data_json).message.content, transcript: item.content };
}
