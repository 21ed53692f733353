import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { callHostApi, deferred } from "../support/host-api";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";

const TTL_MS = 1000; // ARTIFACT_TTL_SECONDS=1
const DAY_MS = 24 * 3600 * 1000;

let host: TestHost;
/** A run whose input is "hold" says it has arrived, then waits to be released before it answers. */
const hold = { arrived: deferred(), release: deferred() };
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "retention",
    runners: [{ name: "default", label: { en_US: "retention" }, capabilities: {}, permissions: { artifacts: ["metadata", "read"] } }],
    async onRun({ body }, res) {
      const ctx = body.context;
      const api = (action: string, params: Record<string, unknown>) => callHostApi(ctx.runtime.api.base_url, ctx.run_id, ctx.runtime.api.token, action, params);
      const w = resultWriter(res, ctx.run_id);
      if (ctx.input.text === "hold") {
        hold.arrived.resolve();
        await hold.release.promise;
      }
      if (ctx.input.text !== "read after expiry") return w.reply("ok");
      const id = ctx.input.attachments[0].artifact_id;
      const fresh = (await api("artifact.read", { artifact_id: id })).status;
      await sleep(TTL_MS + 200);
      const read = await api("artifact.read", { artifact_id: id });
      const metadata = await api("artifact.metadata", { artifact_id: id });
      w.reply(JSON.stringify({ fresh, read: [read.status, read.body.error?.code], metadata: [metadata.status, metadata.body.error?.code] }));
    },
  });
  host = await startTestHost({
    vars: { ARTIFACT_TTL_SECONDS: "1", RETENTION_DAYS: "1", RETENTION_BATCH_SIZE: "2", RETENTION_MAX_BATCHES: "1" },
  });
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "retention" });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
});

const count = async (table: string) => (await host.query<{ n: number }>(`SELECT COUNT(*) AS n FROM ${table}`))[0].n;
const attachment = (text: string) => ({ content_base64: Buffer.from(text).toString("base64"), name: `${text}.txt` });

async function post(conversationId: string, text: string, attachments: unknown[] = []) {
  const posted = await host.postEvent(messageEvent(conversationId, text, { input: { text, attachments } }));
  expect(posted.status).toBe(202);
  const run = await host.waitForRun(posted.body.run_id!);
  expect(run.status).toBe("completed");
  return run;
}

describe("retention", () => {
  it("answers not_found for an artifact past its expiry", async () => {
    const run = await post("ret-1", "read after expiry", [attachment("soon-gone")]);
    expect(JSON.parse(String(run.message?.content))).toEqual({ fresh: 200, read: [404, "not_found"], metadata: [404, "not_found"] });
  });

  it("the cron job deletes expired artifacts, blob and row, in bounded batches", async () => {
    await post("ret-2", "two more", [attachment("a"), attachment("b")]);
    await sleep(TTL_MS + 100);
    expect(await count("artifact")).toBe(3);
    expect(await host.r2Keys("artifacts/")).toHaveLength(3);

    // RETENTION_BATCH_SIZE=2, RETENTION_MAX_BATCHES=1: at most two per invocation, soonest-expiring first.
    await host.triggerScheduled();
    const left = await host.query<{ artifact_id: string; r2_key: string; name: string }>("SELECT artifact_id, r2_key, name FROM artifact");
    expect(left).toHaveLength(1);
    expect(left[0].name).not.toBe("soon-gone.txt");
    expect(await host.r2Keys("artifacts/")).toEqual([left[0].r2_key]);

    await host.triggerScheduled();
    expect(await count("artifact")).toBe(0);
    expect(await host.r2Keys("artifacts/")).toEqual([]);
  });

  it("deletes EventLog and Transcript rows older than RETENTION_DAYS, oldest first, and keeps the rest", async () => {
    await post("ret-old", "old");
    const cutoff = Date.now();
    await sleep(20);
    await post("ret-3", "recent");
    const isOld = (table: string) => host.query<{ n: number }>(`SELECT COUNT(*) AS n FROM ${table} WHERE created_at < ?`, [cutoff]).then((r) => r[0].n);
    const oldEvents = await isOld("event_log");
    const oldItems = await isOld("transcript");
    const recentEvents = (await count("event_log")) - oldEvents;
    const recentItems = (await count("transcript")) - oldItems;
    const oldConversations = (await host.query("SELECT DISTINCT conversation_key FROM transcript WHERE created_at < ?", [cutoff])).length;
    const oldRuns = await isOld("run");
    const ledgerOf = (when: "<" | ">=") => host.query<{ n: number }>(`SELECT COUNT(*) AS n FROM run_event WHERE run_id IN (SELECT run_id FROM run WHERE created_at ${when} ?)`, [cutoff]).then((r) => r[0].n);
    const recentLedger = await ledgerOf(">=");
    const oldLedger = await ledgerOf("<");
    expect(oldLedger).toBeGreaterThan(0);
    expect(recentLedger).toBeGreaterThan(0);
    expect(oldRuns).toBeGreaterThan(2);
    expect(oldEvents).toBeGreaterThan(2);
    expect(oldItems - oldConversations).toBeGreaterThan(2);
    expect(recentEvents).toBeGreaterThan(0);

    // The trigger's scheduled time is "now" for retention: exactly RETENTION_DAYS after the cutoff.
    const scheduledTime = new Date(cutoff + DAY_MS);
    await host.triggerScheduled({ scheduledTime });
    // RETENTION_BATCH_SIZE=2, RETENTION_MAX_BATCHES=1: two rows per table per invocation.
    expect(await isOld("event_log")).toBe(oldEvents - 2);
    expect(await isOld("transcript")).toBe(oldItems - 2);
    // Ledger rows go first, two per statement, and a run only once its ledger is gone.
    expect(await isOld("run")).toBeGreaterThanOrEqual(oldRuns - 2);
    expect(await ledgerOf("<")).toBeGreaterThanOrEqual(oldLedger - 2);

    for (let i = 0; i < 60; i++) await host.triggerScheduled({ scheduledTime });
    expect(await count("event_log")).toBe(recentEvents);
    // Ended runs go with their whole ledger; recent runs and theirs are untouched.
    expect(await isOld("run")).toBe(0);
    expect(await count("run")).toBeGreaterThan(0);
    expect(await count("run_event")).toBe(recentLedger);
    // Each old conversation keeps its newest item, so its sequence (and every cursor into it) never restarts.
    expect(await count("transcript")).toBe(recentItems + oldConversations);
    const oldLeft = await host.query<{ conversation_id: string; seq: number; role: string }>("SELECT conversation_id, seq, role FROM transcript WHERE created_at < ? ORDER BY conversation_id", [cutoff]);
    expect(oldLeft).toEqual([
      { conversation_id: "ret-1", seq: 2, role: "assistant" },
      { conversation_id: "ret-2", seq: 2, role: "assistant" },
      { conversation_id: "ret-old", seq: 2, role: "assistant" },
    ]);
    await post("ret-old", "back again");
    const resumed = await host.query<{ seq: number }>("SELECT seq FROM transcript WHERE conversation_id = 'ret-old' ORDER BY seq");
    expect(resumed.map((r) => r.seq)).toEqual([2, 3, 4]);
  });

  it("keeps a run that has not ended, however old, and lets it finish", async () => {
    const posted = await host.postEvent(messageEvent("ret-held", "hold"));
    expect(posted.status).toBe(202);
    await hold.arrived.promise;
    const ended = () => host.query<{ n: number }>("SELECT COUNT(*) AS n FROM run WHERE status NOT IN ('created', 'running')").then((r) => r[0].n);
    // Everything is older than this cutoff, the running run included; as many invocations as the batches need.
    const sweep = async () => {
      const scheduledTime = new Date(Date.now() + 2 * DAY_MS);
      for (let i = 0; i < 100 && (await ended()) > 0; i++) await host.triggerScheduled({ scheduledTime });
    };
    await sweep();
    expect(await ended()).toBe(0);
    const held = () => host.query<{ status: string }>("SELECT status FROM run WHERE run_id = ?", [posted.body.run_id]);
    expect(await held()).toEqual([{ status: "running" }]);

    hold.release.resolve();
    expect((await host.waitForRun(posted.body.run_id!)).status).toBe("completed");
    await sweep();
    expect(await held()).toEqual([]);
    expect(await count("run_event")).toBe(0);
  });

  it("goes on with the other steps when one fails, and reports the invocation failed", async () => {
    await post("ret-step", "old one");
    await post("ret-step", "old two");
    const cutoff = Date.now();
    await sleep(20);
    const old = () => host.query<{ n: number }>("SELECT COUNT(*) AS n FROM event_log WHERE created_at < ?", [cutoff]).then((r) => r[0].n);
    const before = await old();
    expect(before).toBeGreaterThan(0);
    // The expired-artifacts step, the first, cannot read its batch: the database refuses that query.
    host.databaseOutage({ queries: 10, matching: "expires_at" });
    try {
      await expect(host.triggerScheduled({ scheduledTime: new Date(cutoff + DAY_MS) })).rejects.toThrow(/outcome/);
    } finally {
      host.databaseOutage({ queries: 0 });
    }
    // EventLog retention ran all the same (RETENTION_BATCH_SIZE=2, one batch).
    expect(await old()).toBe(before - 2);
  });
});
