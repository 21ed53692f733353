import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Miniflare } from "miniflare";
import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Readable } from "node:stream";
import { promisify } from "node:util";
import { startEchoRunner } from "../../examples/echo-runner/runner";
import { bundleModules, ROOT } from "../../local/build";
import { COMPATIBILITY_DATE, COMPATIBILITY_FLAGS } from "../../local/host";
import { adminCall, bindRunner } from "../../local/setup";
import { waitForRunOn } from "../support/host";
import { startFakeSqld, type FakeSqld } from "../support/fake-sqld";
import { resultWriter, startAdHocRunner } from "../support/runner";

/**
 * The production deployment as README "Production" describes it: `npm run db:migrate` with LIBSQL_URL and
 * LIBSQL_AUTH_TOKEN against a libSQL server over HTTP, then the Worker with those secrets and no LIBSQL binding.
 * The Worker is the bundle `npm run deploy` uploads (wrangler's own build of wrangler.toml, `--dry-run`), not the
 * tests' esbuild one, so a module that resolves differently under wrangler fails here, not on deploy day.
 */
const ADMIN_TOKEN = "prod-admin-token-0123456789";
const AUTH_TOKEN = "turso-auth-token-abcdef";
const SECRET = "echo-runner-secret-0123456789";
let dir: string;
let sqld: FakeSqld;
let mf: Miniflare;
let url: string;
let logs = "";
let runner: Awaited<ReturnType<typeof startEchoRunner>>;
/** Streams DELTAS message.delta lines, each sent on its own a moment after the last, as a model's tokens come. */
let streaming: Awaited<ReturnType<typeof startAdHocRunner>>;
const DELTAS = 1000;
/** Sends this many results the host drops (a state scope no run has), then fails its run. */
let failing: Awaited<ReturnType<typeof startAdHocRunner>>;
const DROPS = 102;
const host = () => ({ url, adminToken: ADMIN_TOKEN });

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "prod-sqld-"));
  sqld = await startFakeSqld(join(dir, "db.sqlite"), { authToken: AUTH_TOKEN });
  await promisify(execFile)(process.execPath, [join(ROOT, "node_modules/drizzle-kit/bin.cjs"), "migrate"], {
    cwd: ROOT,
    env: { ...process.env, LIBSQL_URL: sqld.url, LIBSQL_AUTH_TOKEN: AUTH_TOKEN },
  });
  runner = await startEchoRunner({ secret: SECRET });
  streaming = await startAdHocRunner({
    name: "token-stream",
    async onRun({ body }, res) {
      const w = resultWriter(res, body.context.run_id);
      for (let i = 0; i < DELTAS; i++) {
        w.send("message.delta", { chunk: { role: "assistant", content: `t${i} ` } });
        await new Promise((r) => setTimeout(r, 2));
      }
      w.reply("done");
    },
  });
  failing = await startAdHocRunner({
    name: "drops-then-fails",
    async onRun({ body }, res) {
      const w = resultWriter(res, body.context.run_id);
      for (let i = 0; i < DROPS; i++) w.send("state.updated", { scope: "galaxy", key: `k${i}`, value: i });
      w.send("run.failed", { code: "runner.gave_up", error: "gave up", retryable: false });
      res.end();
    },
  });
  const scriptPath = process.env.PROD_SCRIPT ?? (await wranglerBundle(join(dir, "deploy")));
  mf = new Miniflare({
    host: "127.0.0.1",
    port: 0,
    ...bundleModules(scriptPath),
    compatibilityDate: COMPATIBILITY_DATE,
    compatibilityFlags: [...COMPATIBILITY_FLAGS],
    durableObjects: { CONVERSATIONS: { className: "ConversationDO", useSQLite: true } },
    r2Buckets: ["ARTIFACTS"],
    bindings: { ADMIN_TOKEN, SECRETS_KEY: Buffer.alloc(32, 9).toString("base64"), LIBSQL_URL: sqld.url, LIBSQL_AUTH_TOKEN: AUTH_TOKEN },
    handleRuntimeStdio: (stdout: Readable, stderr: Readable) => {
      for (const s of [stdout, stderr]) s.on("data", (c: Buffer) => (logs += c.toString("utf8")));
    },
  });
  url = (await mf.ready).origin;
}, 120_000);
/** `wrangler deploy --dry-run`: the deploy build, offline, written to `outDir` instead of uploaded. */
async function wranglerBundle(outDir: string): Promise<string> {
  await promisify(execFile)(process.execPath, [join(ROOT, "node_modules/wrangler/bin/wrangler.js"), "deploy", "--dry-run", "--outdir", outDir], {
    cwd: ROOT,
    env: { ...process.env, WRANGLER_SEND_METRICS: "false", CI: "1" },
  });
  return join(outDir, "index.js");
}

afterAll(async () => {
  await mf?.dispose();
  await runner?.close();
  await streaming?.close();
  await failing?.close();
  await sqld?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("the Worker on Turso/sqld (LIBSQL_URL, LIBSQL_AUTH_TOKEN)", () => {
  it("migrates over HTTP as README says, then registers, binds and runs an event end to end", async () => {
    const applied = sqld.db.prepare("SELECT COUNT(*) AS n FROM __drizzle_migrations").get() as { n: number };
    // Every migration drizzle-kit generated, as its journal lists them.
    const journal = JSON.parse(readFileSync(join(ROOT, "migrations", "meta", "_journal.json"), "utf8")) as { entries: { tag: string }[] };
    expect(applied.n).toBe(journal.entries.length);
    // The readiness check reads what drizzle-kit recorded as `npm start`'s migrator records it.
    const ready = await fetch(`${url}/readyz`);
    expect(await ready.json()).toEqual({ ok: true, host_version: "0.1.0", migration: journal.entries[journal.entries.length - 1]!.tag });
    expect(await bindRunner(host(), { baseUrl: runner.url, secret: SECRET, runnerId: "http:examples/echo/default", agentId: "echo" })).toBe(true);
    const ev = await adminCall<{ run_id: string; disposition: string }>(host(), "POST", "/v1/events", {
      event_type: "message.received",
      conversation_id: "prod-1",
      actor: { actor_type: "user", actor_id: "u1" },
      input: { text: "hello" },
    });
    expect(ev.status, JSON.stringify(ev.body) + logs).toBe(202);
    const run = await waitForRunOn(host() as unknown as Parameters<typeof waitForRunOn>[0], ev.body.run_id);
    expect(run.status, JSON.stringify(run) + logs).toBe("completed");
    const second = await adminCall<{ run_id: string }>(host(), "POST", "/v1/events", {
      event_type: "message.received",
      conversation_id: "prod-1",
      actor: { actor_type: "user", actor_id: "u1" },
      input: { text: "again" },
    });
    const run2 = await waitForRunOn(host() as unknown as Parameters<typeof waitForRunOn>[0], second.body.run_id);
    expect(run2.message?.content).toBe('You said: "again" (turn 2). Before that you said: "hello"');
    // Every request carried the auth token.
    expect(sqld.requests.every((r) => r.authorization === `Bearer ${AUTH_TOKEN}`)).toBe(true);
  });

  it("maps the database's refusals as locally: a second agent on the same scope and event type is a 409", async () => {
    const dup = await adminCall(host(), "POST", "/v1/admin/agents", { agent_id: "echo2", name: "echo2", runner_id: "http:examples/echo/default", event_types: ["message.received"], scope: { type: "global" } });
    expect(dup.status, JSON.stringify(dup.body)).toBe(409);
    const inUse = await adminCall<{ items: { service_id: string }[] }>(host(), "GET", "/v1/admin/runner-services");
    const del = await adminCall(host(), "DELETE", `/v1/admin/runner-services/${inUse.body.items[0].service_id}`);
    expect(del.status, JSON.stringify(del.body)).toBe(409);
  });

  // In production each database round trip made while a run executes is a subrequest of its conversation object's
  // alarm, which Cloudflare caps per invocation (README "Production"): the run's results are written at most once per
  // RUN_WRITE_INTERVAL_MS (250 ms), so what a run costs grows with its time, not with how many results it sends.
  it("writes a run streaming a thousand results one by one in a number of round trips bounded by its time, not by the results", async () => {
    await bindRunner(host(), { baseUrl: streaming.url, runnerId: streaming.runnerId(), agentId: "streamer", scope: { type: "conversation", id: "prod-stream" } });
    const before = sqld.requests.length;
    const startedAt = Date.now();
    const ev = await adminCall<{ run_id: string }>(host(), "POST", "/v1/events", {
      event_type: "message.received",
      conversation_id: "prod-stream",
      actor: { actor_type: "user", actor_id: "u1" },
      input: { text: "stream" },
    });
    expect(ev.status, JSON.stringify(ev.body) + logs).toBe(202);
    // Read from the database file itself: polling the Worker would add round trips of its own to the count.
    const status = () => (sqld.db.prepare("SELECT status FROM run WHERE run_id = ?").get(ev.body.run_id) as { status: string } | undefined)?.status;
    while (!["completed", "failed", "timeout", "cancelled"].includes(status() ?? "") && Date.now() - startedAt < 60_000) await new Promise((r) => setTimeout(r, 20));
    const tookMs = Date.now() - startedAt;
    const roundTrips = sqld.requests.length - before;
    expect(status(), logs).toBe("completed");
    const deltas = sqld.db.prepare("SELECT COUNT(*) AS n FROM run_event WHERE run_id = ? AND type = 'message.delta'").get(ev.body.run_id) as { n: number };
    expect(deltas.n).toBe(DELTAS);
    // Ingress, the claim and the end take a few; the results at most one per 250 ms of the run.
    expect(roundTrips, `${roundTrips} round trips in ${tookMs} ms`).toBeLessThanOrEqual(6 + Math.ceil(tookMs / 250));
  }, 90_000);

  // The run's end writes its run.failed record, and the count of its drops past the first 100, only if that write ended
  // the run: each guarded by `changes()`, the row count of the statement just before it in the batch. Over
  // @libsql/client/web that batch is a Hrana program whose steps run on one connection, nothing between them.
  it("records a failed run's end once, with the count of its drops past the audited ones", async () => {
    await bindRunner(host(), { baseUrl: failing.url, runnerId: failing.runnerId(), agentId: "failing", scope: { type: "conversation", id: "prod-fails" } });
    const ev = await adminCall<{ run_id: string }>(host(), "POST", "/v1/events", { event_type: "message.received", conversation_id: "prod-fails", actor: { actor_type: "user", actor_id: "u1" }, input: { text: "fail" } });
    expect(ev.status, JSON.stringify(ev.body) + logs).toBe(202);
    const run = await waitForRunOn(host() as unknown as Parameters<typeof waitForRunOn>[0], ev.body.run_id);
    expect([run.status, run.error?.code], logs).toEqual(["failed", "runner.gave_up"]);
    const records = (type: string) => sqld.db.prepare("SELECT data_json FROM event_log WHERE run_id = ? AND event_type = ?").all(ev.body.run_id, type) as { data_json: string }[];
    expect(records("run.failed").map((r) => JSON.parse(r.data_json))).toEqual([expect.objectContaining({ status: "failed", code: "runner.gave_up" })]);
    const drops = records("runner.result_dropped").map((r) => JSON.parse(r.data_json) as { ledger_seq: number | null; suppressed?: number });
    expect(drops.filter((d) => d.ledger_seq !== null)).toHaveLength(100);
    expect(drops.filter((d) => d.ledger_seq === null).map((d) => d.suppressed)).toEqual([DROPS - 100]);
  });

  it("runs the retention cron", async () => {
    const worker = (await mf.getWorker()) as unknown as { scheduled(o: { cron: string; scheduledTime: Date }): Promise<{ outcome: string }> };
    const result = await worker.scheduled({ cron: "17 * * * *", scheduledTime: new Date() });
    expect(result.outcome, logs).toBe("ok");
  });
});
