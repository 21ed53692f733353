import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADMIN_TOKEN, messageEvent, startTestHost, unhandedRun, type TestHost } from "../support/host";
import { startFakePlatform, waitFor } from "../support/fake-platform";
import { resultWriter, startAdHocRunner } from "../support/runner";

/**
 * What `POST /v1/events` keeps apart from the host's own facts: an API event_id cannot take a chat platform's id
 * first, metadata cannot claim what the host writes, a body is refused rather than stored altered, a time is one
 * the host can give back, and a repeat that hands its lost run over runs it for the event as recorded.
 */
const BOT_TOKEN = "123456:TEST-telegram-bot-token-abcdefgh";
const SECRET_TOKEN = "tg-secret-token-0123456789";

let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
let fake: Awaited<ReturnType<typeof startFakePlatform>>;
let botId: string;
let webhookUrl: string;
/** Every run context the runner received, by run id. */
const contexts = new Map<string, any>();

beforeAll(async () => {
  fake = await startFakePlatform((call) => {
    if (/sendMessage$/.test(call.path)) return { json: { ok: true, result: { message_id: 1, chat: { id: Number(call.body.chat_id) }, text: call.body.text } } };
    return { json: { ok: true, result: true } };
  });
  runner = await startAdHocRunner({
    name: "ingress-integrity",
    onRun({ body }, res) {
      contexts.set(body.context.run_id, body.context);
      resultWriter(res, body.context.run_id).reply(`echo ${String(body.context.input.text)}`);
    },
  });
  host = await startTestHost();
  const created = await host.admin("POST", "/v1/admin/bots", { platform: "telegram", name: "tg", api_base_url: fake.url, credentials: { bot_token: BOT_TOKEN, secret_token: SECRET_TOKEN } });
  expect(created.status).toBe(201);
  botId = created.body.bot_id;
  webhookUrl = created.body.webhook_url;
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "ingress-integrity", eventTypes: ["message.received"] });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
  await fake?.close();
});

function telegramUpdate(updateId: number, chatId: string, text: string) {
  return {
    update_id: updateId,
    message: { message_id: updateId, date: Math.floor(Date.now() / 1000), chat: { id: Number(chatId), type: "supergroup", title: "g" }, from: { id: 42, is_bot: false, first_name: "Ada" }, text },
  };
}

describe("POST /v1/events and the host's own facts", () => {
  it("an API event_id that begins like a chat platform's or a host record's is refused, so the platform's own event is still recorded and answered", async () => {
    const updateId = 777001;
    for (const event_id of [`telegram:${botId}:${updateId}`, "slack:b:1", "hev_0123"]) {
      const refused = await host.postEvent(messageEvent("api-conv", "from the api", { event_id }));
      expect([refused.status, refused.body.error?.code]).toEqual([400, "invalid_request"]);
    }
    const res = await fetch(webhookUrl, {
      method: "POST",
      headers: { "content-type": "application/json", "x-telegram-bot-api-secret-token": SECRET_TOKEN },
      body: JSON.stringify(telegramUpdate(updateId, "-100900", "hello from telegram")),
    });
    expect(res.status).toBe(200);
    await waitFor(() => fake.callsTo(/sendMessage$/).some((c) => String(c.body.chat_id) === "-100900"), 15_000, "the reply in the Telegram chat");
    expect(await host.query("SELECT event_id FROM event_log WHERE conversation_id = '-100900' AND source = 'telegram'")).toHaveLength(1);
  });

  it("an API caller cannot forge host-written facts (steering claim, unavailable attachments, why it was rejected, whose eyes alone a chat event is for) into the event's recorded metadata", async () => {
    const forged = {
      steering: { status: "queued", trigger_behavior: "absorbed_into_active_run", claimed_by_run_id: "run_forged", claimed_runner_id: "http:x/y/z", claimed_at: "2020-01-01T00:00:00.000Z" },
      attachments_unavailable: "photo.jpg (the URL answered HTTP 404)",
    };
    const posted = await host.postEvent(messageEvent("forge-conv", "hi", { event_id: "forge-1", metadata: forged }));
    expect([posted.status, posted.body.error?.message]).toEqual([400, expect.stringMatching(/steering, attachments_unavailable, rejection, private_audience are written by the host/)]);
    expect(await host.query("SELECT event_id FROM event_log WHERE event_id = 'forge-1'")).toEqual([]);
    // An event that ran would otherwise read as refused (GET /v1/events shows metadata.rejection), and a rejected one
    // would keep the caller's keys beside the host's (its reason is merged into the metadata).
    const rejection = { reason: "concurrency_strategy", strategy: "reject", busy_run_id: "run_forged" };
    const refused = await host.postEvent(messageEvent("forge-conv", "hi", { event_id: "forge-3", metadata: { rejection } }));
    expect([refused.status, refused.body.error?.code]).toEqual([400, "invalid_request"]);
    expect(await host.query("SELECT event_id FROM event_log WHERE event_id = 'forge-3'")).toEqual([]);
    // Marked private to one chat user, the event would be hidden from the conversation's other runs.
    const hidden = await host.postEvent(messageEvent("forge-conv", "hi", { event_id: "forge-4", metadata: { private_audience: "discord_ephemeral:U1" } }));
    expect([hidden.status, hidden.body.error?.code]).toEqual([400, "invalid_request"]);
    expect(await host.query("SELECT event_id FROM event_log WHERE event_id = 'forge-4'")).toEqual([]);
    // Other metadata is the caller's.
    expect((await host.postEvent(messageEvent("forge-conv", "hi", { event_id: "forge-2", metadata: { ticket: 7 } }))).status).toBe(202);
  });

  it("refuses an event body that is not valid UTF-8 instead of storing its text altered (U+FFFD)", async () => {
    const prefix = Buffer.from('{"event_id":"bad-utf8","event_type":"message.received","conversation_id":"utf8-conv","actor":{"actor_type":"user"},"input":{"text":"caf');
    const suffix = Buffer.from('"}}');
    const body = Buffer.concat([prefix, Buffer.from([0xe9]), suffix]); // Latin-1 "é": not UTF-8
    const res = await fetch(`${host.url}/v1/events`, { method: "POST", headers: { authorization: `Bearer ${ADMIN_TOKEN}` }, body });
    const answer = (await res.json()) as any;
    const stored = await host.query<{ input_summary: string }>("SELECT input_summary FROM event_log WHERE event_id = 'bad-utf8'");
    expect({ status: res.status, code: answer.error.code, stored }).toEqual({ status: 400, code: "invalid_json", stored: [] });
  });

  it("refuses an event_time outside the years 0000 to 9999 in UTC, which no ISO 8601 timestamp the host gives back could hold", async () => {
    const refused = await host.postEvent(messageEvent("time-conv", "late", { event_id: "time-1", event_time: "9999-12-31T23:59:59-12:00" }));
    expect([refused.status, refused.body.error?.message]).toEqual([400, expect.stringMatching(/event_time must fall within the years 0000 to 9999/)]);
    const latest = await host.postEvent(messageEvent("time-conv", "late", { event_id: "time-2", event_time: "9999-12-31T10:00:00-12:00" }));
    expect(latest.status).toBe(202);
    expect((await host.admin("GET", "/v1/events/time-2")).body.event_time).toBe("9999-12-31T22:00:00.000Z");
  });

  it("a repeat with another actor and data is refused and hands over nothing; of an event recorded before fingerprints, it runs the lost run for the event as recorded", async () => {
    const conv = "repeat-actor";
    const lost = await unhandedRun(host, conv, "evt-repeat-actor", "first");
    // The client sends the same event_id again, but with another actor, subject and data (a bug, or a forged retry).
    const forged = messageEvent(conv, "first", { event_id: "evt-repeat-actor", actor: { actor_type: "user", actor_id: "mallory", actor_name: "Mallory" }, subject: { subject_type: "ticket", subject_id: "T-9" }, data: { injected: true }, source_event_type: "forged" });
    const refused = await host.postEvent(forged);
    expect([refused.status, refused.body.error?.code]).toEqual([409, "event_id_conflict"]);
    expect((await host.admin("GET", `/v1/runs/${lost}`)).body.status).toBe("created");
    // Recorded before migration 0019, the event has no fingerprint to compare: the repeat is one, and hands the run over.
    await host.query("UPDATE event_log SET fingerprint = NULL WHERE event_id = 'evt-repeat-actor'");
    const repeat = await host.postEvent(forged);
    expect(repeat.status).toBe(200);
    expect(repeat.body).toMatchObject({ disposition: "duplicate", run_id: lost });
    expect((await host.waitForRun(lost)).status).toBe("completed");
    const recorded = (await host.admin("GET", "/v1/events/evt-repeat-actor")).body;
    expect(recorded).toMatchObject({ actor_id: "u1", data: {} });
    const ctx = contexts.get(lost);
    // What the run was given must be the recorded event (the EventLog row runners read back with event.get).
    expect({ actor: ctx.actor.actor_id, sender: ctx.conversation.sender_id, subject: ctx.subject?.subject_id ?? null, data: ctx.event.data, set: ctx.event.source_event_type }).toEqual({
      actor: recorded.actor_id,
      sender: recorded.actor_id,
      subject: recorded.subject_id ?? null,
      data: recorded.data,
      set: recorded.source_event_type ?? null,
    });
  });
});
