import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestHost, type TestHost } from "../support/host";
import { startChatRunner, startFakePlatform, telegramBotApi, waitFor, type FakeReply, type PlatformCall } from "../support/fake-platform";

/**
 * What the welcome run of members who joined together is told of them (`data.members`): only the first one's run is
 * started, so each member is named as a run's actor is (its type, its platform ids), and a join of thousands names
 * the first 1,000 and counts them all, each still an event of its own.
 */
const TG_TOKEN = "123456:TEST-telegram-members-token";
const TG_SECRET = "tg-secret-token-members-01";
const LARK = { app_id: "cli_members_app", app_secret: "lark-members-secret-0123", verification_token: "lark-members-verification" };

let host: TestHost;
let runner: Awaited<ReturnType<typeof startChatRunner>>;
let fake: Awaited<ReturnType<typeof startFakePlatform>>;
const hooks = { telegram: "", lark: "" };
let n = 0;

const telegram = telegramBotApi(TG_TOKEN);
function platformApi(call: PlatformCall): FakeReply {
  if (call.path.startsWith("/bot")) return telegram(call);
  if (call.path === "/open-apis/auth/v3/tenant_access_token/internal") return { json: { code: 0, msg: "ok", tenant_access_token: "t-members", expire: 7200 } };
  if (call.path === "/open-apis/bot/v3/info") return { json: { code: 0, msg: "ok", bot: { open_id: "ou_members_bot" } } };
  if (call.path.startsWith("/open-apis/im/v1/messages") && call.method === "POST") return { json: { code: 0, msg: "success", data: { message_id: `om_answer_${++n}` } } };
  return { status: 404, json: { ok: false, error: "unknown_method" } };
}

beforeAll(async () => {
  fake = await startFakePlatform(platformApi);
  runner = await startChatRunner("joined-together-members");
  host = await startTestHost();
  const bots = [
    ["telegram", "telegram", { bot_token: TG_TOKEN, secret_token: TG_SECRET }],
    ["lark", "lark", LARK],
  ] as const;
  for (const [name, platform, credentials] of bots) {
    const created = await host.admin("POST", "/v1/admin/bots", { platform, api_base_url: fake.url, credentials });
    expect(created.status).toBe(201);
    hooks[name] = created.body.webhook_url;
    await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: `welcome-members-${name}`, scope: { type: "bot", id: botOf(name) }, eventTypes: ["group.member_joined"] });
  }
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
  await fake?.close();
});

const botOf = (name: keyof typeof hooks) => hooks[name].split("/").pop()!;
const post = (url: string, body: unknown, headers: Record<string, string> = {}) => fetch(url, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(body) });
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
});
