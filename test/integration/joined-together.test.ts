import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestHost, type TestHost } from "../support/host";
import { startChatRunner, startFakePlatform, telegramBotApi, upgradeOnTelegram, waitFor, type FakeReply, type PlatformCall } from "../support/fake-platform";

/**
 * Hundreds of members joining a chat at once (an admin adding a team): recorded each as an event of its own within
 * the webhook's answer, welcomed by one run whose event names them all, so the chat gets one welcome, not hundreds;
 * each member named as a run's actor is (its type, its platform ids), the first 1,000 of a join of thousands, all counted.
 */
const TG_TOKEN = "123456:TEST-telegram-joins-token";
const TG_SECRET = "tg-secret-token-joins-0123";
const LARK = { app_id: "cli_joins_app", app_secret: "lark-joins-secret-0123", verification_token: "lark-joins-verification-01" };
const MEMBERS = 300;

let host: TestHost;
let runner: Awaited<ReturnType<typeof startChatRunner>>;
let fake: Awaited<ReturnType<typeof startFakePlatform>>;
const hooks = { telegram: "", lark: "", larkUnbound: "", telegramPaused: "" };
let n = 0;

const telegram = telegramBotApi(TG_TOKEN);
function platformApi(call: PlatformCall): FakeReply {
  if (call.path.startsWith("/bot")) return telegram(call);
  if (call.path === "/open-apis/auth/v3/tenant_access_token/internal") return { json: { code: 0, msg: "ok", tenant_access_token: "t-joins", expire: 7200 } };
  if (call.path === "/open-apis/bot/v3/info") return { json: { code: 0, msg: "ok", bot: { open_id: "ou_joins_bot" } } };
  if (call.path.startsWith("/open-apis/im/v1/messages") && call.method === "POST") return { json: { code: 0, msg: "success", data: { message_id: `om_answer_${++n}` } } };
  return { status: 404, json: { ok: false, error: "unknown_method" } };
}

beforeAll(async () => {
  fake = await startFakePlatform(platformApi);
  runner = await startChatRunner("joined-together");
  host = await startTestHost();
  const bots = [
    ["telegram", "telegram", { bot_token: TG_TOKEN, secret_token: TG_SECRET }],
    ["lark", "lark", LARK],
    ["larkUnbound", "lark", { ...LARK, app_id: "cli_joins_unbound" }],
    ["telegramPaused", "telegram", { bot_token: "123457:TEST-telegram-joins-paused", secret_token: TG_SECRET }],
  ] as const;
  for (const [name, platform, credentials] of bots) {
    const created = await host.admin("POST", "/v1/admin/bots", { platform, api_base_url: fake.url, credentials });
    expect(created.status).toBe(201);
    hooks[name] = created.body.webhook_url;
  }
  const paused = await host.admin("GET", `/v1/admin/bots/${botOf("telegramPaused")}`);
  expect((await host.admin("PUT", `/v1/admin/bots/${botOf("telegramPaused")}`, { ...paused.body, enabled: false })).status).toBe(200);
  for (const name of ["telegram", "lark", "telegramPaused"] as const) await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: `welcome-${name}`, scope: { type: "bot", id: botOf(name) }, eventTypes: ["group.member_joined"] });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
  await fake?.close();
});

const botOf = (name: keyof typeof hooks) => hooks[name].split("/").pop()!;
const post = (url: string, body: unknown, headers: Record<string, string> = {}) => fetch(url, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(body) });
const joinsOf = (conversation: string) =>
  host.query<{ event_id: string; actor_id: string; actor_name: string; disposition: string; run_id: string | null; metadata_json: string }>(
    "SELECT event_id, actor_id, actor_name, disposition, run_id, metadata_json FROM event_log WHERE conversation_id = ? AND event_type = 'group.member_joined' ORDER BY seq",
    [conversation],
  );
const runsOf = (conversation: string) => runner.contexts.filter((c) => c.conversation.conversation_id === conversation);

describe("members joining together", () => {
  it("Telegram: each member recorded in the webhook's answer, one welcome run naming them all (the bot's own arrival left out)", async () => {
    const people = Array.from({ length: MEMBERS }, (_, i) => ({ id: 5000 + i, is_bot: false, first_name: `Member ${i}` }));
    const ourBot = { id: 123456, is_bot: true, first_name: "Us" };
    const update = { update_id: 910_001, message: { message_id: 77, date: 1_700_000_000, chat: { id: -1009100, type: "supergroup", title: "Team" }, from: { id: 42, is_bot: false, first_name: "Admin" }, new_chat_members: [people[0], ourBot, ...people.slice(1)] } };
    const res = await post(hooks.telegram, update, { "x-telegram-bot-api-secret-token": TG_SECRET });
    expect(res.status).toBe(200);
    // Recorded by the time the platform has its answer.
    const rows = await joinsOf("-1009100");
    expect(rows.map((r) => r.actor_id)).toEqual(people.map((p) => String(p.id)));
    const [first, ...others] = rows;
    expect(first).toMatchObject({ event_id: `telegram:${botOf("telegram")}:910001:joined:5000`, disposition: "bound", run_id: expect.any(String) });
    for (const row of others) {
      expect(row).toMatchObject({ disposition: "merged", run_id: first.run_id });
      expect(JSON.parse(row.metadata_json)).toMatchObject({ joined_with: first.event_id });
    }
    expect(others[41]).toMatchObject({ event_id: `telegram:${botOf("telegram")}:910001:joined:5042`, actor_name: "Member 42" });
    const [self] = await host.query<{ source_event_type: string }>("SELECT source_event_type FROM event_log WHERE event_id = ?", [`telegram:${botOf("telegram")}:910001:joined:123456`]);
    expect(self).toEqual({ source_event_type: "new_chat_members.self" });

    const [ctx] = await waitFor(() => runsOf("-1009100").length > 0 && runsOf("-1009100"), 15_000, "the welcome run");
    expect(ctx.run_id).toBe(first.run_id);
    expect(ctx.actor).toMatchObject({ actor_id: "5000", actor_name: "Member 0" });
    expect(ctx.event.data.added_by).toBe("42");
    expect(ctx.event.data.members).toEqual(people.map((p) => ({ actor_type: "user", actor_id: String(p.id), actor_name: p.first_name, metadata: {} })));
    expect(ctx.event.data.members_count).toBe(MEMBERS);
    await waitFor(() => fake.callsTo(/\/sendMessage$/).some((c) => c.body.chat_id === "-1009100"), 15_000, "the welcome");

    // Telegram sending it again records and runs nothing more.
    expect((await post(hooks.telegram, update, { "x-telegram-bot-api-secret-token": TG_SECRET })).status).toBe(200);
    expect(await joinsOf("-1009100")).toEqual(rows);
    const [{ runs }] = await host.query<{ runs: number }>("SELECT COUNT(*) AS runs FROM run WHERE conversation_id = '-1009100'");
    expect(runs).toBe(1);
    expect(runsOf("-1009100")).toHaveLength(1);
    expect(fake.callsTo(/\/sendMessage$/).filter((c) => c.body.chat_id === "-1009100")).toHaveLength(1);
  });

  const joinUpdate = (updateId: number, chat: string, ids: number[]) => ({
    update_id: updateId,
    message: { message_id: updateId, date: 1_700_000_000, chat: { id: Number(chat), type: "supergroup", title: "Team" }, from: { id: 42, is_bot: false, first_name: "Admin" }, new_chat_members: ids.map((id) => ({ id, is_bot: false, first_name: `M${id}` })) },
  });

  it("Telegram: members joining a group's supergroup together are all recorded in the group's conversation, each naming the supergroup", async () => {
    await upgradeOnTelegram(hooks.telegram, TG_SECRET, "-9102", "-1009102");
    expect((await post(hooks.telegram, joinUpdate(910_101, "-1009102", [61, 62, 63]), { "x-telegram-bot-api-secret-token": TG_SECRET })).status).toBe(200);
    const rows = await host.query<{ actor_id: string; disposition: string; data_json: string }>("SELECT actor_id, disposition, data_json FROM event_log WHERE conversation_id = '-9102' AND event_type = 'group.member_joined' ORDER BY seq");
    expect(rows.map((r) => [r.actor_id, r.disposition, JSON.parse(r.data_json).chat_id])).toEqual([
      ["61", "bound", "-1009102"],
      ["62", "merged", "-1009102"],
      ["63", "merged", "-1009102"],
    ]);
    const [ctx] = await waitFor(() => runsOf("-9102").length > 0 && runsOf("-9102"), 15_000, "the welcome run");
    expect(ctx.event.data.members.map((m: { actor_id: string }) => m.actor_id)).toEqual(["61", "62", "63"]);
  });

  it("Telegram: a paused bot records every member bot_disabled, joined with the first, and runs nothing", async () => {
    expect((await post(hooks.telegramPaused, joinUpdate(910_201, "-1009103", [71, 72, 73]), { "x-telegram-bot-api-secret-token": TG_SECRET })).status).toBe(200);
    const rows = await joinsOf("-1009103");
    const first = `telegram:${botOf("telegramPaused")}:910201:joined:71`;
    expect(rows.map((r) => [r.actor_id, r.disposition, r.run_id, JSON.parse(r.metadata_json).joined_with])).toEqual([
      ["71", "bot_disabled", null, undefined],
      ["72", "bot_disabled", null, first],
      ["73", "bot_disabled", null, first],
    ]);
    const [{ runs }] = await host.query<{ runs: number }>("SELECT COUNT(*) AS runs FROM run WHERE conversation_id = '-1009103'");
    expect(runs).toBe(0);
  });

  const larkAdded = (eventId: string, chat: string) => ({
    schema: "2.0",
    header: { event_id: eventId, event_type: "im.chat.member.user.added_v1", create_time: String(Date.now()), token: LARK.verification_token, app_id: LARK.app_id, tenant_key: "tenant_1" },
    event: { chat_id: chat, operator_id: { open_id: "ou_admin" }, users: Array.from({ length: MEMBERS }, (_, i) => ({ name: `Person ${i}`, tenant_key: "tenant_1", user_id: { open_id: `ou_p${i}` } })) },
  });

  it("Lark: the users added are recorded before its answer (no retry needed), and welcomed once", async () => {
    const res = await post(hooks.lark, larkAdded("ev_joins_1", "oc_joins"));
    expect(res.status).toBe(200);
    const rows = await joinsOf("oc_joins");
    expect(rows.map((r) => r.actor_id)).toEqual(Array.from({ length: MEMBERS }, (_, i) => `ou_p${i}`));
    expect(new Set(rows.slice(1).map((r) => `${r.disposition} ${r.run_id}`))).toEqual(new Set([`merged ${rows[0].run_id}`]));
    const [ctx] = await waitFor(() => runsOf("oc_joins").length > 0 && runsOf("oc_joins"), 15_000, "the welcome run");
    expect(ctx.event.data.members).toHaveLength(MEMBERS);
    expect(ctx.event.data.members[299]).toEqual({ actor_type: "user", actor_id: "ou_p299", actor_name: "Person 299", metadata: { open_id: "ou_p299", union_id: null, user_id: null } });
    await waitFor(() => fake.callsTo(/\/open-apis\/im\/v1\/messages$/).some((c) => c.body?.receive_id === "oc_joins"), 15_000, "the welcome");
    expect(runsOf("oc_joins")).toHaveLength(1);
  });

  it("Lark: a bot no agent welcomes with records every member unbound, the first one's reason on its view", async () => {
    const payload = larkAdded("ev_joins_2", "oc_joins_unbound");
    payload.header.app_id = "cli_joins_unbound";
    expect((await post(hooks.larkUnbound, payload)).status).toBe(200);
    const rows = await joinsOf("oc_joins_unbound");
    expect(rows).toHaveLength(MEMBERS);
    expect(new Set(rows.map((r) => `${r.disposition} ${r.run_id}`))).toEqual(new Set(["unbound null"]));
    const { last_unbound_event: unbound } = (await host.admin("GET", `/v1/admin/bots/${botOf("larkUnbound")}`)).body;
    expect(unbound).toMatchObject({ event_id: rows[0].event_id, event_type: "group.member_joined" });
  });
});

const welcomeIn = async (conversation: string) => {
  const [ctx] = await waitFor(() => runner.contexts.some((c) => c.conversation.conversation_id === conversation) && runner.contexts.filter((c) => c.conversation.conversation_id === conversation), 15_000, "the welcome run");
  return ctx;
};

describe("the members a welcome run is told of", () => {
  it("Lark: each named with its type and ids as a run's actor is; of 1,500 added, the first 1,000 named, all counted, all recorded", async () => {
    const added = 1_500;
    const users = Array.from({ length: added }, (_, i) => ({ name: `Person ${i}`, tenant_key: "tenant_1", user_id: { open_id: `ou_m${i}`, union_id: `on_m${i}`, user_id: `emp${i}` } }));
    const payload = {
      schema: "2.0",
      header: { event_id: "ev_members_1", event_type: "im.chat.member.user.added_v1", create_time: String(Date.now()), token: LARK.verification_token, app_id: LARK.app_id, tenant_key: "tenant_1" },
      event: { chat_id: "oc_members", operator_id: { open_id: "ou_admin" }, users },
    };
    expect((await post(hooks.lark, payload)).status).toBe(200);
    const [{ recorded }] = await host.query<{ recorded: number }>("SELECT COUNT(*) AS recorded FROM event_log WHERE conversation_id = 'oc_members' AND event_type = 'group.member_joined'", []);
    expect(recorded).toBe(added);

    const ctx = await welcomeIn("oc_members");
    expect(ctx.event.data.members_count).toBe(added);
    expect(ctx.event.data.members).toHaveLength(1_000);
    expect(ctx.event.data.members[0]).toEqual({ actor_type: "user", actor_id: "ou_m0", actor_name: "Person 0", metadata: { open_id: "ou_m0", union_id: "on_m0", user_id: "emp0" } });
    expect(ctx.event.data.members[999]).toEqual({ actor_type: "user", actor_id: "ou_m999", actor_name: "Person 999", metadata: { open_id: "ou_m999", union_id: "on_m999", user_id: "emp999" } });
    // One beyond those named is an event of its own, merged into the welcome.
    const [last] = await host.query<{ disposition: string; run_id: string }>("SELECT disposition, run_id FROM event_log WHERE event_id = ?", [`lark:${botOf("lark")}:ev_members_1:ou_m1499`]);
    expect(last).toEqual({ disposition: "merged", run_id: ctx.run_id });
  });

  it("Telegram: another bot added with people is named a bot, with its username", async () => {
    const update = {
      update_id: 920_001,
      message: {
        message_id: 5,
        date: 1_700_000_000,
        chat: { id: -1009200, type: "supergroup", title: "Team" },
        from: { id: 42, is_bot: false, first_name: "Admin" },
        new_chat_members: [
          { id: 601, is_bot: false, first_name: "Ann", username: "ann_t" },
          { id: 602, is_bot: true, first_name: "Helper", username: "helper_bot" },
          { id: 603, is_bot: false, first_name: "Bo" },
        ],
      },
    };
    expect((await post(hooks.telegram, update, { "x-telegram-bot-api-secret-token": TG_SECRET })).status).toBe(200);
    const ctx = await welcomeIn("-1009200");
    expect(ctx.event.data.members_count).toBe(3);
    expect(ctx.event.data.members).toEqual([
      { actor_type: "user", actor_id: "601", actor_name: "Ann", metadata: { username: "ann_t" } },
      { actor_type: "bot", actor_id: "602", actor_name: "Helper", metadata: { username: "helper_bot" } },
      { actor_type: "user", actor_id: "603", actor_name: "Bo", metadata: {} },
    ]);
  });

  it("Telegram: a member named twice is one join, listed and counted once; the bot's own arrival named first leads nothing", async () => {
    const ann = { id: 611, is_bot: false, first_name: "Ann" };
    const bo = { id: 612, is_bot: false, first_name: "Bo" };
    const ourBot = { id: 123456, is_bot: true, first_name: "Us" };
    const update = { update_id: 920_101, message: { message_id: 6, date: 1_700_000_000, chat: { id: -1009201, type: "supergroup", title: "Team" }, from: { id: 42, is_bot: false, first_name: "Admin" }, new_chat_members: [ourBot, ann, bo, ann] } };
    expect((await post(hooks.telegram, update, { "x-telegram-bot-api-secret-token": TG_SECRET })).status).toBe(200);
    const rows = await joinsOf("-1009201");
    expect(rows.map((r) => [r.actor_id, r.disposition])).toEqual([
      ["611", "bound"],
      ["612", "merged"],
    ]);
    const ctx = await welcomeIn("-1009201");
    expect(ctx.actor).toMatchObject({ actor_id: "611" });
    expect(ctx.event.data.members.map((m: { actor_id: string }) => m.actor_id)).toEqual(["611", "612"]);
    expect(ctx.event.data.members_count).toBe(2);
  });

  it("Lark: a user named twice in one users-added event is one join, listed and counted once", async () => {
    const user = (i: number) => ({ name: `Twice ${i}`, tenant_key: "tenant_1", user_id: { open_id: `ou_t${i}` } });
    const payload = {
      schema: "2.0",
      header: { event_id: "ev_members_twice", event_type: "im.chat.member.user.added_v1", create_time: String(Date.now()), token: LARK.verification_token, app_id: LARK.app_id, tenant_key: "tenant_1" },
      event: { chat_id: "oc_twice", operator_id: { open_id: "ou_admin" }, users: [user(1), user(2), user(1), user(3), user(2)] },
    };
    expect((await post(hooks.lark, payload)).status).toBe(200);
    expect((await joinsOf("oc_twice")).map((r) => [r.actor_id, r.disposition])).toEqual([
      ["ou_t1", "bound"],
      ["ou_t2", "merged"],
      ["ou_t3", "merged"],
    ]);
    const ctx = await welcomeIn("oc_twice");
    expect(ctx.event.data.members.map((m: { actor_id: string }) => m.actor_id)).toEqual(["ou_t1", "ou_t2", "ou_t3"]);
    expect(ctx.event.data.members_count).toBe(3);
  });
});
