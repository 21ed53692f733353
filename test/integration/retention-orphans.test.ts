import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { uploadArtifact } from "../support/host-api";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";

/**
 * Blobs no row names: a platform payload stored before its event could be
 * recorded, an upload whose row write got no answer. Nothing would ever find
 * them again, so the cron job walks the bucket and deletes them once they are
 * past the grace period (a week), a bounded page at a time, resuming where
 * the last invocation stopped. Named blobs are never touched.
 */
const DAY_MS = 24 * 3600 * 1000;
const SECRET_TOKEN = "orphan-sweep-secret-token";
let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
let webhookUrl: string;

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "orphans",
    runners: [{ name: "default", label: { en_US: "x" }, capabilities: {}, permissions: { artifacts: ["metadata", "read"] } }],
    async onRun({ body }, res) {
      const ctx = body.context;
      const up = await uploadArtifact(ctx.runtime.api.base_url, ctx.run_id, ctx.runtime.api.token, Buffer.from(ctx.input.text), { name: `${ctx.input.text}.txt`, mime_type: "text/plain" });
      resultWriter(res, ctx.run_id).reply(JSON.stringify({ status: up.status, code: up.body.error?.code }));
    },
  });
  // Two keys per page, one page per invocation: the walk takes several invocations.
  host = await startTestHost({ vars: { RETENTION_BATCH_SIZE: "2", RETENTION_MAX_BATCHES: "1", DB_QUERY_TIMEOUT_MS: "1000" } });
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "orphans" });
  const bot = await host.admin("POST", "/v1/admin/bots", { platform: "telegram", api_base_url: "http://127.0.0.1:9", credentials: { bot_token: "1:orphan", secret_token: SECRET_TOKEN } });
  expect(bot.status).toBe(201);
  webhookUrl = bot.body.webhook_url;
});
afterAll(async () => {
  host?.databaseOutage(false);
  await host?.dispose();
  await runner?.close();
});

/** A Telegram member-join update: recorded as an event, no run and no reply. */
function deliver(updateId: number) {
  const body = {
    update_id: updateId,
    message: { message_id: updateId, date: Math.floor(Date.now() / 1000), chat: { id: -700, type: "group" }, from: { id: 1, is_bot: false, first_name: "A" }, new_chat_members: [{ id: updateId, is_bot: false, first_name: "N" }] },
  };
  return fetch(webhookUrl, { method: "POST", headers: { "x-telegram-bot-api-secret-token": SECRET_TOKEN }, body: JSON.stringify(body) });
}

async function upload(text: string) {
  const posted = await host.postEvent(messageEvent(`orphans-${text}`, text));
  expect(posted.status).toBe(202);
  return JSON.parse(String((await host.waitForRun(posted.body.run_id!, 30_000)).message?.content));
}

const bucketKeys = async () => [...(await host.r2Keys("raw/")), ...(await host.r2Keys("artifacts/"))].sort();
const namedKeys = async () =>
  [
    ...(await host.query<{ k: string }>("SELECT raw_ref AS k FROM event_log WHERE raw_ref IS NOT NULL")),
    ...(await host.query<{ k: string }>("SELECT r2_key AS k FROM artifact")),
  ]
    .map((r) => r.k)
    .sort();

describe("blobs no row names", () => {
  it("are deleted past the grace period, a page per invocation, and named blobs stay", async () => {
    const before = new Set(await bucketKeys());
    // Named: a recorded platform event's payload and an uploaded artifact.
    expect((await deliver(1)).status).toBe(200);
    expect(await upload("kept")).toEqual({ status: 200 });
    // Orphaned: an update's event insert fails, so only its payload is stored (Telegram would redeliver);
    // the upload's row insert gets no answer, so its blob is kept in case it was committed.
    host.databaseOutage({ queries: 1, matching: 'insert into \\"event_log\\"' });
    expect((await deliver(2)).status).toBeGreaterThanOrEqual(500);
    // No answer within DB_QUERY_TIMEOUT_MS, then refused: the Worker cannot tell it was not written.
    host.databaseOutage({ delayMs: 1_500, matching: 'INSERT INTO \\"artifact\\"' });
    host.databaseOutage({ queries: 1, matching: 'INSERT INTO \\"artifact\\"' });
    expect(await upload("lost")).toEqual({ status: 500, code: "runtime_error" });

    const all = await bucketKeys();
    const added = all.filter((k) => !before.has(k));
    const named = await namedKeys();
    expect(added.filter((k) => named.includes(k))).toHaveLength(2);
    const orphans = added.filter((k) => !named.includes(k));
    expect(orphans).toHaveLength(2);
    expect(orphans.some((k) => k.startsWith("raw/telegram/"))).toBe(true);
    expect(orphans.some((k) => k.startsWith("artifacts/"))).toBe(true);

    // Within the grace period nothing is touched, however many invocations.
    for (let i = 0; i < 4; i++) await host.triggerScheduled({ scheduledTime: new Date(Date.now() + 6 * DAY_MS) });
    expect(await bucketKeys()).toEqual(all);

    // Past it, each invocation looks at two keys from where the last stopped; a few invocations cover the bucket.
    const later = new Date(Date.now() + 8 * DAY_MS);
    await host.triggerScheduled({ scheduledTime: later });
    expect((await bucketKeys()).length).toBeGreaterThan(all.length - 2);
    for (let i = 0; i < all.length; i++) await host.triggerScheduled({ scheduledTime: later });
    expect(await bucketKeys()).toEqual(await namedKeys());
    for (const k of orphans) expect(await host.r2Object(k)).toBeNull();
    const [kept] = await host.query<{ r2_key: string }>("SELECT r2_key FROM artifact WHERE name = 'kept.txt'");
    expect(await host.r2Object(kept.r2_key)).toEqual(new Uint8Array(Buffer.from("kept")));
  });

  it("a payload stored by a failed first delivery is named by the redelivery, and the sweep keeps it", async () => {
    const before = new Set(await host.r2Keys("raw/"));
    host.databaseOutage({ queries: 1, matching: 'insert into \\"event_log\\"' });
    expect((await deliver(30)).status).toBeGreaterThanOrEqual(500);
    const [stored] = (await host.r2Keys("raw/")).filter((k) => !before.has(k));
    expect(await host.query("SELECT seq FROM event_log WHERE raw_ref = ?", [stored])).toEqual([]);

    expect((await deliver(30)).status).toBe(200);
    expect(await host.query("SELECT seq FROM event_log WHERE raw_ref = ?", [stored])).toHaveLength(1);
    const bucketSize = (await bucketKeys()).length;
    for (let i = 0; i <= bucketSize; i++) await host.triggerScheduled({ scheduledTime: new Date(Date.now() + 30 * DAY_MS) });
    expect(JSON.parse(Buffer.from((await host.r2Object(stored))!).toString()).update_id).toBe(30);
  });
});
