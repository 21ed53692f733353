import { createClient } from "@libsql/client";
import type { Miniflare } from "miniflare";
import { execFile } from "node:child_process";
import { createHmac } from "node:crypto";
import { copyFileSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ROOT } from "../../local/build";
import { startHost, type LocalHost } from "../../local/host";
import { adminCall } from "../../local/setup";
import { sealValues, secretBox } from "../../src/lib/secret-box";
import { conversationKey } from "../../src/stores/conversation-key";
import { botSlot } from "../../src/stores/secret-slots";
import { startFakePlatform, waitFor } from "../support/fake-platform";
import { startFakeSqld, type FakeSqld } from "../support/fake-sqld";
import { productionWorker } from "../support/production-worker";
import { callHostApi } from "../support/host-api";
import { ADMIN_TOKEN, SECRETS_KEY, waitForRunOn } from "../support/host";
import { databaseBefore, migrationTags } from "../support/old-release-db";
import { resultWriter, startAdHocRunner } from "../support/runner";
import { SLACK_AUTH_TEST } from "../support/slack-events";

/**
 * An operator upgrading (README "Production"): a database as the release whose last migration was 0020 left it, its
 * agent, bot, chat messages, transcript and runs included, taken over by this release as README says: `npm start`
 * migrating its own file, and `npm run db:migrate` migrating LIBSQL_URL before the Worker is deployed on it.
 */
const SIGNING_SECRET = "slack-signing-secret-upgrade-0123456789";
const BOT = "slack-old";
const AGENT = "old-agent";
const CHANNEL = "C-OLD";
const DAY = 24 * 3600 * 1000;
const then = Date.now() - 30 * DAY;
const key = conversationKey({ workspaceId: "acme", botId: BOT, conversationId: CHANNEL });
const slackId = (ts: string) => `slack:${BOT}:msg:${CHANNEL}:${ts}`;
const SLACK_TS = ["1700000001.000100", "1700000002.000100", "1700000003.000100"];

/** What each event recorded by the old release is to be found by once the cron has given it its message_ref. */
const EXPECTED_REFS: Record<string, string | null> = {
  [slackId(SLACK_TS[0])]: SLACK_TS[0],
  "slack:slack-old:del:C-OLD:1699999999.000100": null,
  "telegram:tg-old:msg:-1001:77": "77",
  "lark:lark-old:msg:om_old": "om_old",
  "discord:dc-old:msg:555": null,
  "api-event-old": null,
  [slackId(SLACK_TS[1])]: SLACK_TS[1],
  [slackId(SLACK_TS[2])]: SLACK_TS[2],
};

let dir: string;
let fake: Awaited<ReturnType<typeof startFakePlatform>>;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
/** What each run of the runner read through the Host API. */
const reads: { history: any[]; recalled: any; kept: any }[] = [];

/** Rows as the release at 0020 wrote them: its registry, agent and bot; a channel's three messages answered; other events. */
async function seedOldRelease(path: string) {
  const db = createClient({ url: `file:${path}` });
  const run = (sql: string, args: unknown[] = []) => db.execute({ sql, args: args as never });
  const manifest = (await (await fetch(`${runner.url}/manifest`)).json()) as { runners: unknown[] };
  await run("INSERT INTO runner_service (service_id, base_url, author, name, version, manifest_json, fetched_at, created_at) VALUES ('svc_old', ?, 'tests', 'upgraded', '0.0.1', ?, ?, ?)", [runner.url, JSON.stringify(manifest), then, then]);
  await run("INSERT INTO runner (runner_id, service_id, name, manifest_json, updated_at) VALUES (?, 'svc_old', 'default', ?, ?)", [runner.runnerId(), JSON.stringify(manifest.runners[0]), then]);
  const credentials = await sealValues(secretBox(SECRETS_KEY), { bot_token: "xoxb-old-token", signing_secret: SIGNING_SECRET }, botSlot({ botId: BOT, platform: "slack", apiBaseUrl: fake.url }));
  await run("INSERT INTO bot (bot_id, platform, name, workspace_id, api_base_url, credentials_json, enabled, created_at, updated_at) VALUES (?, 'slack', 'old', 'acme', ?, ?, 1, ?, ?)", [BOT, fake.url, JSON.stringify(credentials), then - DAY, then - DAY]);
  await run(
    `INSERT INTO agent (agent_id, name, runner_id, runner_config_json, event_types_json, scope_type, scope_id, resource_policy_json, state_policy_json, delivery_policy_json, concurrency_json, enabled, state_epoch, created_at, updated_at)
     VALUES (?, 'old', ?, '{}', '["message.received"]', 'bot', ?, '{"models":[],"fallback_models":[],"tools":[],"knowledge_bases":[]}', '{"enable_state":true,"state_scopes":["conversation","actor"]}', '{"streaming":true,"failure_notice":"Sorry.","format":"markdown"}', '{}', 1, 'epoch_old', ?, ?)`,
    [AGENT, runner.runnerId(), BOT, then, then],
  );
  await run("INSERT INTO agent_binding (scope_type, scope_id, event_type, agent_id) VALUES ('bot', ?, 'message.received', ?)", [BOT, AGENT]);
  const event = (id: string, source: string, sourceType: string, eventType: string, botId: string | null, conversation: string, data: object, at: number, text: string | null = null, runId: string | null = null) =>
    run(
      `INSERT INTO event_log (event_id, event_type, event_time, source, source_event_type, workspace_id, bot_id, conversation_key, conversation_id, actor_type, actor_id, input_json, input_summary, data_json, run_id, agent_id, disposition, accept_id, metadata_json, created_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'user', 'U42', ?, ?, ?, ?, ?, ?, 'acc_old', '{}', ?)`,
      [id, eventType, new Date(at).toISOString(), source, sourceType, botId === BOT ? "acme" : null, botId, botId === BOT ? key : `k-${id}`, conversation, text === null ? null : JSON.stringify({ text, contents: [], attachments: [] }), text, JSON.stringify(data), runId, runId ? AGENT : null, runId ? "started" : "unbound", at],
    );
  /** A channel message, its user item, its run and its answer, as ingress and the run's end wrote them. */
  const answered = async (i: number) => {
    const [ts, at, text, runId] = [SLACK_TS[i], then + i * 3600_000, `old question ${i}`, `run_old_${i}`];
    await event(slackId(ts), "slack", "message", "message.received", BOT, CHANNEL, { team_id: "T1", slack_event_id: `EvOld${i}`, ts, channel_type: "channel", raw_text: text }, at, text, runId);
    const item = (seq: number, role: string, content: string) =>
      run("INSERT INTO transcript (transcript_id, conversation_key, seq, event_id, run_id, conversation_id, role, item_type, content, metadata_json, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, 'message', ?, ?, ?)", [
        `tr_old_${seq}`, key, seq, slackId(ts), role === "user" ? null : runId, CHANNEL, role, content, role === "user" ? '{"actor_type":"user","actor_id":"U42","actor_name":null}' : "{}", at,
      ]);
    await item(2 * i + 1, "user", text);
    await run(
      `INSERT INTO run (run_id, event_id, conversation_key, conversation_id, workspace_id, bot_id, agent_id, runner_id, status, finish_reason, final_message_json, result_count, latest_transcript_seq, agent_epoch, created_at, started_at, ended_at)
       VALUES (?, ?, ?, ?, 'acme', ?, ?, ?, 'completed', 'stop', ?, 1, ?, 'epoch_old', ?, ?, ?)`,
      [runId, slackId(ts), key, CHANNEL, BOT, AGENT, runner.runnerId(), JSON.stringify({ role: "assistant", content: `old answer ${i}` }), 2 * i + 1, at, at + 10, at + 900],
    );
    await item(2 * i + 2, "assistant", `old answer ${i}`);
  };
  // Oldest first, as they were recorded: the first message, then events of other kinds, then the other two.
  await answered(0);
  await event("slack:slack-old:del:C-OLD:1699999999.000100", "slack", "message.message_deleted", "message.recalled", BOT, CHANNEL, { team_id: "T1", message_id: "1699999999.000100" }, then + 4000_000);
  await event("telegram:tg-old:msg:-1001:77", "telegram", "message", "message.received", "tg-old", "-1001", { update_id: 9, chat_type: "group", chat_title: "Team", message_id: 77, reply_to_message_id: null }, then + 4100_000, "hi");
  await event("lark:lark-old:msg:om_old", "lark", "message", "message.received", "lark-old", "oc_1", { message_id: "om_old", chat_type: "group", message_type: "text" }, then + 4200_000, "hello");
  await event("discord:dc-old:msg:555", "discord", "message", "message.received", "dc-old", "ch-1", { message_id: "555" }, then + 4300_000, "yo");
  await event("api-event-old", "api", "message.received", "message.received", null, "api-conv", {}, then + 4400_000, "from the API");
  await answered(1);
  await answered(2);
  db.close();
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "upgrade-0020-"));
  fake = await startFakePlatform((call) => (call.path === "/chat.postMessage" ? { json: { ok: true, channel: call.body.channel, ts: `${Date.now() / 1000}` } } : { json: call.path === "/auth.test" ? SLACK_AUTH_TEST : { ok: true } }));
  runner = await startAdHocRunner({
    name: "upgraded",
    async onRun({ body }, res) {
      const ctx = body.context;
      const api = (action: string, params: Record<string, unknown>) => callHostApi(ctx.runtime.api.base_url, ctx.run_id, ctx.runtime.api.token, action, params);
      const history = (await api("history.page", { limit: 50 })).body.data?.items ?? [];
      const recalled = (await api("event.get", { event_id: slackId(SLACK_TS[0]) })).body.data;
      const kept = (await api("event.get", { event_id: slackId(SLACK_TS[1]) })).body.data;
      reads.push({ history, recalled, kept });
      resultWriter(res, ctx.run_id).reply("read");
    },
  });
  mkdirSync(join(dir, "migrations"));
  await databaseBefore("0021_message_ref", join(dir, "host.db"), join(dir, "migrations"));
  await seedOldRelease(join(dir, "host.db"));
  // The same database for the production path, migrated there by drizzle-kit instead.
  copyFileSync(join(dir, "host.db"), join(dir, "turso.db"));
}, 60_000);

afterAll(async () => {
  await runner?.close();
  await fake?.close();
  rmSync(dir, { recursive: true, force: true });
});

const refs = async (read: (sql: string) => Promise<{ event_id: string; message_ref: string | null }[]>) =>
  Object.fromEntries((await read("SELECT event_id, message_ref FROM event_log ORDER BY seq")).map((r) => [r.event_id, r.message_ref]));

describe("upgrading a database the release at migration 0020 left", () => {
  it("npm start's own file: migrates it without rewriting EventLog, then the cron gives old chat messages their refs, newest first, and an old message's recall finds its item", async () => {
    let logs = "";
    const host: LocalHost = await startHost({
      adminToken: ADMIN_TOKEN,
      dbUrl: `file:${join(dir, "host.db")}`,
      scriptPath: join(ROOT, "dist/test/worker.js"),
      vars: { SECRETS_KEY, RETENTION_BATCH_SIZE: "2", RETENTION_MAX_BATCHES: "2" },
      onRuntimeOutput: (text) => (logs += text),
    });
    try {
      const tags = migrationTags();
      expect(await (await fetch(`${host.url}/readyz`)).json()).toEqual({ ok: true, host_version: "0.1.0", migration: tags.at(-1) });
      expect((await host.query<{ n: number }>("SELECT COUNT(*) AS n FROM __drizzle_migrations"))[0].n).toBe(tags.length);
      // The migration added the column and its index and wrote no row: one UPDATE of every chat message would rewrite
      // EventLog whole inside it, holding the write lock (and every write of the Worker still running) as long.
      expect(Object.values(await refs((sql) => host.query(sql))).filter((r) => r !== null)).toEqual([]);

      // Old data reads through the API as before.
      const old = await adminCall<{ event_id: string; input: { text: string } }>(host, "GET", `/v1/events/${encodeURIComponent(slackId(SLACK_TS[1]))}`);
      expect([old.status, old.body.input.text]).toEqual([200, "old question 1"]);
      const listed = await adminCall<{ items: { run_id: string }[] }>(host, "GET", `/v1/runs?agent_id=${AGENT}`);
      expect(listed.body.items.map((r) => r.run_id)).toEqual(["run_old_2", "run_old_1", "run_old_0"]);
      // A runner service the old release stored has no updated_at (0028): its created_at stands for it, so the copy a GET
      // answers applies when sent back, and is stale once it has.
      const service = await adminCall<Record<string, unknown>>(host, "GET", "/v1/admin/runner-services/svc_old");
      expect(service.body.updated_at).toBe(new Date(then).toISOString());
      const put = await adminCall<{ service: { updated_at: string } }>(host, "PUT", "/v1/admin/runner-services/svc_old", service.body);
      expect(put.status).toBe(200);
      expect(Date.parse(put.body.service.updated_at)).toBeGreaterThan(then);
      expect((await adminCall(host, "PUT", "/v1/admin/runner-services/svc_old", service.body)).status).toBe(409);

      // Each invocation gives at most RETENTION_MAX_BATCHES statements of RETENTION_BATCH_SIZE rows, newest rows first.
      await host.triggerScheduled();
      expect(await refs((sql) => host.query(sql))).toEqual({ ...Object.fromEntries(Object.keys(EXPECTED_REFS).map((id) => [id, null])), [slackId(SLACK_TS[1])]: SLACK_TS[1], [slackId(SLACK_TS[2])]: SLACK_TS[2] });
      await host.triggerScheduled();
      await host.triggerScheduled();
      expect(await refs((sql) => host.query(sql))).toEqual(EXPECTED_REFS);
      expect(JSON.parse(new TextDecoder().decode((await host.r2Object("host/message-ref-sweep.json"))!))).toEqual({ done: true });
      await host.triggerScheduled();
      const counted = () => [...logs.matchAll(/^retention: (\{.*\})$/gm)].map((m) => JSON.parse(m[1]).messageRefs);
      await expect.poll(counted).toEqual([2, 3, 0, 0]);
      expect(fake.calls.filter((c) => c.path === "/auth.test")).toHaveLength(1);

      // The oldest message, recalled on Slack now: found by its ref, its transcript item marked.
      const body = JSON.stringify({
        token: "t", team_id: "T1", api_app_id: "A1", type: "event_callback", event_id: "EvRecall", event_time: Math.floor(Date.now() / 1000),
        authorizations: [{ team_id: "T1", user_id: "UBOT", is_bot: true }],
        event: { type: "message", subtype: "message_deleted", channel: CHANNEL, deleted_ts: SLACK_TS[0], ts: "1800000000.000100", previous_message: { user: "U42", ts: SLACK_TS[0], text: "old question 0" } },
      });
      const timestamp = Math.floor(Date.now() / 1000);
      const signature = `v0=${createHmac("sha256", SIGNING_SECRET).update(`v0:${timestamp}:${body}`).digest("hex")}`;
      const res = await fetch(`${host.url}/v1/webhooks/slack/${BOT}`, { method: "POST", headers: { "content-type": "application/json", "x-slack-request-timestamp": String(timestamp), "x-slack-signature": signature }, body });
      expect(res.status).toBe(200);
      const item = async () => (await host.query<{ content: string | null; recalled: string | null }>("SELECT content, json_extract(metadata_json, '$.recalled.event_id') AS recalled FROM transcript WHERE event_id = ? AND role = 'user'", [slackId(SLACK_TS[0])]))[0];
      await waitFor(async () => (await item()).recalled !== null, 10_000, "the old message's item marked recalled");
      expect((await item()).content).toBeNull();

      // The old agent answers a new message in the channel, reading its history and its events as they are now.
      const message = JSON.stringify({
        token: "t", team_id: "T1", api_app_id: "A1", type: "event_callback", event_id: "EvNew", event_time: timestamp,
        authorizations: [{ team_id: "T1", user_id: "UBOT", is_bot: true }],
        event: { type: "message", channel: CHANNEL, channel_type: "channel", user: "U42", text: "anything new?", ts: "1800000001.000100", team: "T1" },
      });
      const signed = `v0=${createHmac("sha256", SIGNING_SECRET).update(`v0:${timestamp}:${message}`).digest("hex")}`;
      await fetch(`${host.url}/v1/webhooks/slack/${BOT}`, { method: "POST", headers: { "content-type": "application/json", "x-slack-request-timestamp": String(timestamp), "x-slack-signature": signed }, body: message });
      const newRun = await waitFor(async () => (await host.query<{ run_id: string }>("SELECT run_id FROM run WHERE agent_id = ? AND run_id NOT LIKE 'run_old_%'", [AGENT]))[0]?.run_id, 15_000, "the new run");
      expect((await waitForRunOn(host, newRun)).status).toBe("completed");
      const [read] = reads;
      // Newest first: the recalled one keeps its place, with nothing of the message in it.
      expect(read.history.map((i: { role: string; content?: string; metadata: { recalled?: unknown } }) => [i.role, i.content ?? null, i.metadata.recalled !== undefined])).toEqual([
        ["user", "anything new?", false], ["assistant", "old answer 2", false], ["user", "old question 2", false], ["assistant", "old answer 1", false],
        ["user", "old question 1", false], ["assistant", "old answer 0", false], ["user", null, true],
      ]);
      expect(read.recalled.metadata.recalled).toMatchObject({ event_id: expect.any(String) });
      expect(read.kept).toMatchObject({ event_id: slackId(SLACK_TS[1]), input_summary: "old question 1" });
      expect(read.kept.metadata.recalled).toBeUndefined();

      // The old bot's row named no installation: the cron asked Slack's auth.test which workspace its token is (T1), once,
      // ahead of any request, and its first verified request (the recall) kept the app it named. A request its app's
      // signing secret signed for another workspace (the app installed there too) is refused now, and runs nothing.
      const [row] = await host.query<{ installation_json: string }>("SELECT installation_json FROM bot WHERE bot_id = ?", [BOT]);
      expect(JSON.parse(row.installation_json).installation).toEqual({ team_id: "T1", enterprise_id: null, enterprise_install: false, app_id: "A1" });
      expect(fake.calls.filter((c) => c.path === "/auth.test")).toHaveLength(1);
      const other = message.replaceAll('"T1"', '"T2"').replace("EvNew", "EvOtherWorkspace").replace("1800000001.000100", "1800000002.000100");
      const otherSigned = `v0=${createHmac("sha256", SIGNING_SECRET).update(`v0:${timestamp}:${other}`).digest("hex")}`;
      const refused = await fetch(`${host.url}/v1/webhooks/slack/${BOT}`, { method: "POST", headers: { "content-type": "application/json", "x-slack-request-timestamp": String(timestamp), "x-slack-signature": otherSigned }, body: other });
      expect([refused.status, refused.headers.get("x-slack-no-retry")]).toEqual([403, "1"]);
      expect(await host.query("SELECT event_id FROM event_log WHERE event_id LIKE '%1800000002.000100'")).toEqual([]);
    } finally {
      await host.dispose();
    }
  }, 60_000);

  it("LIBSQL_URL: npm run db:migrate applies the new migrations over HTTP, and the Worker deployed on it gives the refs from its cron", async () => {
    const AUTH = "turso-auth-token-upgrade";
    let sqld: FakeSqld | undefined;
    let mf: Miniflare | undefined;
    try {
      sqld = await startFakeSqld(join(dir, "turso.db"), { authToken: AUTH });
      await promisify(execFile)(process.execPath, [join(ROOT, "node_modules/drizzle-kit/bin.cjs"), "migrate"], { cwd: ROOT, env: { ...process.env, LIBSQL_URL: sqld.url, LIBSQL_AUTH_TOKEN: AUTH } });
      const rows = <T>(sql: string) => sqld!.db.prepare(sql).all() as T[];
      expect(rows<{ n: number }>("SELECT COUNT(*) AS n FROM __drizzle_migrations")[0].n).toBe(migrationTags().length);
      expect(rows<{ name: string }>("SELECT name FROM sqlite_master WHERE type = 'index' AND name IN ('event_log_message', 'agent_created', 'run_agent') ORDER BY name").map((r) => r.name)).toEqual(["agent_created", "event_log_message", "run_agent"]);
      expect(Object.values(await refs(async (sql) => rows(sql))).filter((r) => r !== null)).toEqual([]);

      mf = productionWorker({ ADMIN_TOKEN, SECRETS_KEY, LIBSQL_URL: sqld.url, LIBSQL_AUTH_TOKEN: AUTH });
      const url = (await mf.ready).origin;
      const worker = (await mf.getWorker()) as unknown as { scheduled(o: { cron: string; scheduledTime: Date }): Promise<{ outcome: string }> };
      expect((await worker.scheduled({ cron: "17 * * * *", scheduledTime: new Date() })).outcome).toBe("ok");
      expect(await refs(async (sql) => rows(sql))).toEqual(EXPECTED_REFS);
      const listed = await adminCall<{ items: { run_id: string }[] }>({ url, adminToken: ADMIN_TOKEN }, "GET", `/v1/runs?agent_id=${AGENT}&limit=2`);
      expect(listed.body.items.map((r) => r.run_id)).toEqual(["run_old_2", "run_old_1"]);
    } finally {
      await mf?.dispose();
      await sqld?.close();
    }
  }, 120_000);
});
