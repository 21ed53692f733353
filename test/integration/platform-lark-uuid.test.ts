import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestHost, type TestHost } from "../support/host";
import { startChatRunner, startFakePlatform, waitFor, type FakeReply, type PlatformCall } from "../support/fake-platform";

/**
 * Lark drops a send whose uuid it has seen in the last hour and answers with
 * the first message. A streamed card whose send was posted but answered too
 * late must not make the final text look like a retry of it, and two runs
 * saying the same thing in the same chat are not one repeated send.
 */
const APP_ID = "cli_uuid_app_0001";
const VERIFICATION_TOKEN = "lark-uuid-verification-token";

let host: TestHost;
let fake: Awaited<ReturnType<typeof startFakePlatform>>;
let runner: Awaited<ReturnType<typeof startChatRunner>>;
let webhookUrl = "";
let nextId = 0;
const byUuid = new Map<string, string>();
/** What each message shows now, by message id. */
const shown = new Map<string, string>();
let answerLate = true;
/** Sends (by text) whose first attempt is posted but answered after the timeout. */
const lateOnce = new Set<string>();
const sendsWith = (text: string) => fake.calls.filter((c) => c.method === "POST" && /\/reply$/.test(c.path) && String(c.body?.content).includes(text));

async function larkApi(call: PlatformCall): Promise<FakeReply> {
  if (call.path === "/open-apis/auth/v3/tenant_access_token/internal") return { json: { code: 0, msg: "ok", tenant_access_token: "t-uuid-tenant-token", expire: 7200 } };
  if (call.method === "POST" && (/\/reply$/.test(call.path) || call.path === "/open-apis/im/v1/messages")) {
    const seen = byUuid.get(call.body.uuid);
    if (seen) return { json: { code: 0, msg: "success", data: { message_id: seen } } };
    const id = `om_uuid_${++nextId}`;
    byUuid.set(call.body.uuid, id);
    shown.set(id, call.body.content);
    // The first send is posted, but its answer comes after the host's PLATFORM_API_TIMEOUT_MS.
    const late = [...lateOnce].find((text) => String(call.body.content).includes(text));
    if (answerLate || late) {
      answerLate = false;
      if (late) lateOnce.delete(late);
      await new Promise((r) => setTimeout(r, 1_500));
    }
    return { json: { code: 0, msg: "success", data: { message_id: id } } };
  }
  if (call.method === "PATCH") {
    shown.set(call.path.split("/").pop()!, call.body.content);
    return { json: { code: 0, msg: "success", data: {} } };
  }
  return { status: 404, json: { code: 404, msg: "not found" } };
}

beforeAll(async () => {
  fake = await startFakePlatform(larkApi);
  runner = await startChatRunner("lark-uuid");
  host = await startTestHost({ vars: { PLATFORM_API_TIMEOUT_MS: "1000" } });
  const created = await host.admin("POST", "/v1/admin/bots", { platform: "lark", api_base_url: fake.url, credentials: { app_id: APP_ID, app_secret: "lark-uuid-app-secret-0123", verification_token: VERIFICATION_TOKEN } });
  webhookUrl = created.body.webhook_url;
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "lark-uuid", scope: { type: "bot", id: created.body.bot_id } });
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "lark-welcome", scope: { type: "bot", id: created.body.bot_id }, eventTypes: ["group.member_joined"] });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
  await fake?.close();
});

describe("Lark: a streamed card answered too late", () => {
  it("still shows the final text: it is never sent under the card's uuid", async () => {
    const ev = {
      schema: "2.0",
      header: { event_id: "ev_uuid_1", event_type: "im.message.receive_v1", create_time: String(Date.now()), token: VERIFICATION_TOKEN, app_id: APP_ID, tenant_key: "t" },
      event: { sender: { sender_id: { open_id: "ou_1" }, sender_type: "user" }, message: { message_id: "om_user_1", chat_id: "oc_1", chat_type: "group", message_type: "text", content: JSON.stringify({ text: "stream alpha beta gamma" }) } },
    };
    expect((await fetch(webhookUrl, { method: "POST", body: JSON.stringify(ev) })).status).toBe(200);
    await waitFor(() => [...shown.values()].some((content) => content.includes("alpha beta gamma")), 15_000, "the final text on screen");
  });
});

describe("Lark: a send answered too late", () => {
  it("is retried under the same uuid, so the answer is shown once and recorded as delivered", async () => {
    lateOnce.add("echo: late answer");
    const ev = {
      schema: "2.0",
      header: { event_id: "ev_uuid_2", event_type: "im.message.receive_v1", create_time: String(Date.now()), token: VERIFICATION_TOKEN, app_id: APP_ID, tenant_key: "t" },
      event: { sender: { sender_id: { open_id: "ou_1" }, sender_type: "user" }, message: { message_id: "om_user_2", chat_id: "oc_2", chat_type: "group", message_type: "text", content: JSON.stringify({ text: "late answer" }) } },
    };
    expect((await fetch(webhookUrl, { method: "POST", body: JSON.stringify(ev) })).status).toBe(200);
    const attempts = await waitFor(() => sendsWith("echo: late answer").length >= 2 && sendsWith("echo: late answer"), 15_000, "the retry");
    expect(new Set(attempts.map((a) => a.body.uuid)).size).toBe(1);
    expect([...shown.values()].filter((content) => content.includes("echo: late answer"))).toHaveLength(1);
    const runId = runner.contexts.find((c) => c.input.text === "late answer").run_id;
    const records = await waitFor(async () => {
      const rows = await host.query<{ event_type: string; data_json: string }>("SELECT event_type, data_json FROM event_log WHERE run_id = ? AND event_type IN ('delivery.succeeded', 'delivery.failed') ORDER BY seq", [runId]);
      return rows.some((r) => r.event_type === "delivery.succeeded") && rows.map((r) => ({ type: r.event_type, ...JSON.parse(r.data_json) }));
    }, 15_000, "the delivery record");
    // The timed-out attempt is recorded as one to retry, then the send as delivered, under the message Lark posted once.
    expect(records).toMatchObject([
      { type: "delivery.failed", operation: "send", code: "timeout", will_retry: true },
      { type: "delivery.succeeded", operation: "send", message_id: byUuid.get(attempts[0].body.uuid) },
    ]);
  });
});

describe("Lark: two runs answering the same text in the same chat", () => {
  it("posts both: the second is not dropped as a repeat of the first", async () => {
    const joined = (eventId: string, openId: string) => ({
      schema: "2.0",
      header: { event_id: eventId, event_type: "im.chat.member.user.added_v1", create_time: String(Date.now()), token: VERIFICATION_TOKEN, app_id: APP_ID, tenant_key: "t" },
      event: { chat_id: "oc_welcome", operator_id: { open_id: "ou_op" }, users: [{ name: openId, tenant_key: "t", user_id: { open_id: openId } }] },
    });
    const welcomes = () => fake.calls.filter((c) => c.method === "POST" && c.path === "/open-apis/im/v1/messages" && c.body.receive_id === "oc_welcome");
    for (const [eventId, openId] of [["ev_join_1", "ou_ann"], ["ev_join_2", "ou_ben"]]) {
      const sent = welcomes().length;
      expect((await fetch(webhookUrl, { method: "POST", body: JSON.stringify(joined(eventId, openId)) })).status).toBe(200);
      await waitFor(() => welcomes().length > sent, 15_000, `the welcome for ${openId}`);
    }
    // The same text each time (a welcome without input), posted as two messages.
    const [first, second] = welcomes();
    expect(first.body.content).toBe(second.body.content);
    expect(first.body.uuid).not.toBe(second.body.uuid);
    expect(new Set(welcomes().map((c) => byUuid.get(c.body.uuid))).size).toBe(2);
  });
});
