import { createHash, createHmac } from "node:crypto";
import { readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestHost, type TestHost } from "../support/host";
import { startChatRunner, startFakePlatform, telegramBotApi, waitFor, type FakeReply, type PlatformCall } from "../support/fake-platform";
import { discordKeyPair, postInteraction } from "../support/discord-signing";
import { SLACK_AUTH_TEST, slackDeletion, slackEdit } from "../support/slack-events";

/**
 * A runner author's contract: what README's "`event.data` by platform" table (and the shapes it names) promises a
 * runner is what one gets, for an update of each kind sent through each platform's webhook. The keys expected are read
 * from README itself, so the table and the code cannot drift apart unnoticed.
 */
const README = readFileSync(new URL("../../README.md", import.meta.url), "utf8");

/** The table's row for a platform's event kind: the keys it always carries, and those it names after "when". */
function documented(platform: string, sourceEventType: string): { always: string[]; when: string[] } {
  const section = README.split("### `event.data` by platform")[1].split("\n## ")[0];
  const names = (cell: string) => [...cell.replace(/\([^()]*\)/g, "").matchAll(/`([a-z_]+)`/g)].map((m) => m[1]);
  for (const line of section.split("\n").filter((l) => l.startsWith(`| ${platform} |`))) {
    const [, , kind, keys] = line.split("|").map((c) => c.trim());
    const kinds = [...(/\(([^()]*)\)$/.exec(kind)?.[1] ?? "").matchAll(/`([^`]+)`/g)].map((m) => m[1]);
    if (!kinds.includes(sourceEventType)) continue;
    const at = keys.search(/(^|; )when /);
    return at < 0 ? { always: names(keys), when: [] } : { always: names(keys.slice(0, at)), when: names(keys.slice(at)) };
  }
  throw new Error(`README documents no event.data for ${platform} ${sourceEventType}`);
}

/** The keys README says `data` holds for this kind, with those of its "when" clauses this update meets. */
function keysFor(platform: string, sourceEventType: string, met: string[] = []): string[] {
  const row = documented(platform, sourceEventType);
  for (const key of met) expect(row.when, `${platform} ${sourceEventType}: "when" names ${key}`).toContain(key);
  return [...row.always, ...met].sort();
}

/** A shape README writes as `name` … `{a, b, c}` in the paragraph that starts with `opening`. */
function shapeAfter(opening: string, name: string): string[] {
  const paragraph = README.split("\n- ").find((p) => p.startsWith(opening)) ?? README.split("\n\n").find((p) => p.startsWith(opening));
  const shape = new RegExp(`${name}[^{]*?\`\\{([^}]*)\\}\``).exec(paragraph ?? "");
  if (!shape) throw new Error(`README gives no shape of ${name} after ${opening}`);
  return shape[1].split(",").map((k) => k.trim().split(":")[0]).sort();
}

const TG_TOKEN = "123456:TEST-telegram-contract-token";
const TG_SECRET = "tg-secret-token-contract-0123";
const SLACK_TOKEN = "xoxb-TEST-contract-token-1234567890";
const SLACK_SECRET = "slack-contract-signing-secret-0123456789";
const LARK = { app_id: "cli_contract_app", app_secret: "lark-contract-secret-0123", verification_token: "lark-contract-verification-01" };
const DISCORD_APP = "5566778899001122";
const discordKey = discordKeyPair();

let host: TestHost;
let runner: Awaited<ReturnType<typeof startChatRunner>>;
let fake: Awaited<ReturnType<typeof startFakePlatform>>;
const hooks: Record<"telegram" | "slack" | "lark" | "discord", string> = { telegram: "", slack: "", lark: "", discord: "" };
let n = 0;

const telegram = telegramBotApi(TG_TOKEN);
/** One fake for the four platforms: each calls its own paths. */
function platformApi(call: PlatformCall): FakeReply {
  // Who the bot token is (its workspace T1, as the envelopes say): the host checks every request against it.
  if (call.path === "/auth.test") return { json: SLACK_AUTH_TEST };
  if (call.path.startsWith("/bot") || call.path.startsWith("/file/")) return telegram(call);
  if (call.path === "/chat.postMessage") return { json: { ok: true, channel: call.body.channel, ts: `${1_800_000_000 + ++n}.000100` } };
  if (call.path === "/chat.update") return { json: { ok: true, channel: call.body.channel, ts: call.body.ts } };
  // A thread's parent, as Slack gives it to a reply in the thread.
  if (call.path === "/conversations.replies") return { json: { ok: true, messages: [{ type: "message", ts: call.query.get("ts") ?? new URLSearchParams(call.raw).get("ts"), user: "U77", text: "the plan" }] } };
  if (call.path === "/open-apis/auth/v3/tenant_access_token/internal") return { json: { code: 0, msg: "ok", tenant_access_token: "t-contract", expire: 7200 } };
  if (call.path === "/open-apis/bot/v3/info") return { json: { code: 0, msg: "ok", bot: { open_id: "ou_contract_bot" } } };
  if (call.path.startsWith("/open-apis/im/v1/messages") && call.method !== "GET") return { json: { code: 0, msg: "success", data: { message_id: `om_answer_${++n}` } } };
  if (call.path.startsWith("/open-apis/im/v1/messages/")) return { status: 400, json: { code: 230027, msg: "Lack of necessary permissions" } };
  if (call.path.startsWith(`/webhooks/${DISCORD_APP}/`)) return { json: { id: `discord_msg_${++n}`, content: call.body?.content } };
  return { status: 404, json: { ok: false, error: "unknown_method" } };
}

beforeAll(async () => {
  fake = await startFakePlatform(platformApi);
  runner = await startChatRunner("event-data-contract");
  host = await startTestHost({ vars: { ALBUM_WAIT_MS: "0" } });
  const credentials = {
    telegram: { bot_token: TG_TOKEN, secret_token: TG_SECRET },
    slack: { bot_token: SLACK_TOKEN, signing_secret: SLACK_SECRET },
    lark: LARK,
    discord: { application_id: DISCORD_APP, public_key: discordKey.publicKeyHex, bot_token: "discord-contract-bot-token" },
  };
  for (const platform of ["telegram", "slack", "lark", "discord"] as const) {
    const created = await host.admin("POST", "/v1/admin/bots", { platform, api_base_url: fake.url, credentials: credentials[platform] });
    expect(created.status).toBe(201);
    hooks[platform] = created.body.webhook_url;
  }
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "contract", eventTypes: ["message.received", "message.recalled", "group.member_joined"] });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
  await fake?.close();
});

/** What the runner got for the event its webhook recorded as `eventId`. */
const contextOf = (eventId: string) => waitFor(() => runner.contexts.find((c) => c.event.event_id === eventId), 15_000, `the run of ${eventId}`);
const sortedKeys = (o: Record<string, unknown>) => Object.keys(o).sort();

async function postJson(url: string, body: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(url, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(body) });
  expect(res.status, await res.clone().text()).toBe(200);
  return res;
}

describe("event.data by platform, as README's table lists it", () => {
  let update = 500_000;
  const sendTelegram = (payload: Record<string, unknown>) => postJson(hooks.telegram, { update_id: ++update, ...payload }, { "x-telegram-bot-api-secret-token": TG_SECRET }).then(() => `telegram:${hooks.telegram.split("/").pop()}:${update}`);
  const group = (id: number) => ({ id, type: "supergroup", title: "Team" });
  const ada = { id: 42, is_bot: false, first_name: "Ada" };
  const message = (chat: number, extra: Record<string, unknown>) => ({ message_id: ++n, date: Math.floor(Date.now() / 1000), chat: group(chat), from: ada, ...extra });

  it("Telegram: a message, a reply (reply_to's shape), an album's item, a location, a button press and a join", async () => {
    const plain = await contextOf(await sendTelegram({ message: { ...message(-1001, { text: "hello" }), chat: { id: 1001, type: "private" } } }));
    expect(sortedKeys(plain.event.data)).toEqual(keysFor("Telegram", "message"));
    expect(plain.event.data).toMatchObject({ chat_type: "private", chat_title: null, reply_to_message_id: null, raw_text: "hello", reply_to: null });
    expect(plain.delivery.reply_target).toEqual({ chat_id: "1001", message_thread_id: null, reply_to_message_id: plain.event.data.message_id });
    expect(sortedKeys(plain.delivery.reply_target)).toEqual(shapeAfter("`ctx.delivery.reply_target`", "Telegram"));

    const replied = message(-1002, { text: "the build is red", from: { id: 7, is_bot: false, first_name: "Bob" } });
    const reply = await contextOf(await sendTelegram({ message: message(-1002, { text: "since when?", reply_to_message: replied }) }));
    expect(sortedKeys(reply.event.data)).toEqual(keysFor("Telegram", "message"));
    expect(sortedKeys(reply.event.data.reply_to)).toEqual(shapeAfter("`reply_to`", "the message replied to"));
    expect(reply.event.data.reply_to).toEqual({ message_id: replied.message_id, actor: { actor_type: "user", actor_id: "7", actor_name: "Bob" }, text: "the build is red", quote: null, attachments: [], unavailable: null });

    const album = await contextOf(await sendTelegram({ message: message(-1003, { caption: "two shots", media_group_id: "mg1", photo: [{ file_id: "p1", width: 9, height: 9 }] }) }));
    expect(sortedKeys(album.event.data)).toEqual(keysFor("Telegram", "message", ["media_group_id"]));

    const location = { latitude: 48.8584, longitude: 2.2945 };
    const here = await contextOf(await sendTelegram({ message: message(-1004, { location }) }));
    expect(sortedKeys(here.event.data)).toEqual(keysFor("Telegram", "message", ["location"]));

    const keyboard = { inline_keyboard: [[{ text: "Ship it", callback_data: "ship" }]] };
    const pressed = { message_id: 4321, date: Math.floor(Date.now() / 1000), chat: group(-1005), from: { id: 123456, is_bot: true, first_name: "Bot" }, text: "Ship?", reply_markup: keyboard };
    const press = await contextOf(await sendTelegram({ callback_query: { id: "cbq-1", from: ada, chat_instance: "ci", message: pressed, data: "ship" } }));
    expect(sortedKeys(press.event.data)).toEqual(keysFor("Telegram", "callback_query"));
    expect(sortedKeys(press.event.data.component)).toEqual([...shapeAfter("`component`", "every press"), "label"].sort());
    expect(press.delivery.reply_target).toEqual({ chat_id: "-1005", message_thread_id: null, reply_to_message_id: 4321 });

    const join = await contextOf(`${await sendTelegram({ message: message(-1006, { new_chat_members: [{ id: 77, is_bot: false, first_name: "Cy" }] }) })}:joined:77`);
    expect(sortedKeys(join.event.data)).toEqual(keysFor("Telegram", "new_chat_members"));
    expect(join.event.data.added_by).toBe("42");
    // Several at once: the first one's run names them all.
    const together = await contextOf(`${await sendTelegram({ message: message(-1007, { new_chat_members: [{ id: 78, is_bot: false, first_name: "Di" }, { id: 79, is_bot: false, first_name: "Ed" }] }) })}:joined:78`);
    expect(sortedKeys(together.event.data)).toEqual(keysFor("Telegram", "new_chat_members", ["members", "members_count"]));
    expect(together.event.data.members).toEqual([
      { actor_type: "user", actor_id: "78", actor_name: "Di", metadata: {} },
      { actor_type: "user", actor_id: "79", actor_name: "Ed", metadata: {} },
    ]);
    expect(together.event.data.members_count).toBe(2);
  });

  const slackSign = (body: string) => {
    const ts = String(Math.floor(Date.now() / 1000));
    return { "x-slack-request-timestamp": ts, "x-slack-signature": `v0=${createHmac("sha256", SLACK_SECRET).update(`v0:${ts}:${body}`).digest("hex")}` };
  };
  const slackBot = () => hooks.slack.split("/").pop();
  async function sendSlack(event: Record<string, unknown>): Promise<string> {
    const envelope = { type: "event_callback", team_id: "T1", api_app_id: "A1", event_id: `Ev${++n}`, event_time: Math.floor(Date.now() / 1000), authorizations: [{ user_id: "UBOT", is_bot: true }], event };
    await postJson(hooks.slack, envelope, slackSign(JSON.stringify(envelope)));
    return envelope.event_id;
  }
  async function sendSlackForm(form: Record<string, string>): Promise<void> {
    const body = new URLSearchParams(form).toString();
    const res = await fetch(hooks.slack, { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded", ...slackSign(body) }, body });
    expect(res.status).toBe(200);
  }
  const slackTs = () => `${1_700_000_000 + ++n}.000200`;

  it("Slack: a message, a thread's reply, a press, a slash command, a message shortcut, a join, a recall and an edit's record", async () => {
    const ts = slackTs();
    await sendSlack({ type: "message", channel: "C-DATA", channel_type: "channel", user: "U42", text: "hello <@U7>", ts });
    const said = await contextOf(`slack:${slackBot()}:msg:C-DATA:${ts}`);
    expect(sortedKeys(said.event.data)).toEqual(keysFor("Slack", "message"));
    expect(said.event.data).toMatchObject({ ts, channel_type: "channel", raw_text: "hello <@U7>", reply_to: null });
    expect(sortedKeys(said.delivery.reply_target)).toEqual(shapeAfter("`ctx.delivery.reply_target`", "Slack"));

    const parent = slackTs();
    const inThread = slackTs();
    await sendSlack({ type: "app_mention", channel: "C-DATA2", user: "U42", text: "<@UBOT> thoughts?", ts: inThread, thread_ts: parent });
    const threaded = await contextOf(`slack:${slackBot()}:msg:C-DATA2:${inThread}`);
    expect(sortedKeys(threaded.event.data)).toEqual(keysFor("Slack", "app_mention"));
    expect(threaded.event.data.channel_type).toBeNull();
    expect(sortedKeys(threaded.event.data.reply_to)).toEqual(shapeAfter("`reply_to`", "the message replied to"));
    expect(threaded.event.data.reply_to).toMatchObject({ message_id: parent, text: "the plan", unavailable: null });
    expect(threaded.conversation.thread_id).toBe(parent);

    const user = { id: "U42", username: "ada", team_id: "T1" };
    const pressedTs = slackTs();
    const press = { type: "block_actions", user, trigger_id: `${++n}.press`, team: { id: "T1" }, container: { type: "message", message_ts: pressedTs, channel_id: "C-DATA3" }, channel: { id: "C-DATA3" }, message: { ts: pressedTs, text: "Ship?" }, actions: [{ type: "button", action_id: "ship", block_id: "b1", value: "yes" }] };
    await sendSlackForm({ payload: JSON.stringify(press) });
    const pressCtx = await contextOf(`slack:${slackBot()}:interaction:${press.trigger_id}`);
    expect(sortedKeys(pressCtx.event.data)).toEqual(keysFor("Slack", "block_actions"));
    expect(sortedKeys(pressCtx.event.data.component)).toEqual([...shapeAfter("`component`", "every press"), "block_id"].sort());

    const command = { team_id: "T1", channel_id: "C-DATA4", channel_name: "general", user_id: "U42", user_name: "ada", command: "/ask", text: "what is X", trigger_id: `${++n}.cmd` };
    await sendSlackForm(command);
    const asked = await contextOf(`slack:${slackBot()}:interaction:${command.trigger_id}`);
    expect(sortedKeys(asked.event.data)).toEqual(keysFor("Slack", "slash_command"));

    const used = { ts: slackTs(), text: "the release notes", user: "U7" };
    const shortcut = { type: "message_action", callback_id: "summarize", trigger_id: `${++n}.sc`, team: { id: "T1" }, user, channel: { id: "C-DATA5" }, message: used };
    await sendSlackForm({ payload: JSON.stringify(shortcut) });
    const summarised = await contextOf(`slack:${slackBot()}:interaction:${shortcut.trigger_id}`);
    expect(sortedKeys(summarised.event.data)).toEqual(keysFor("Slack", "message_action"));

    const joined = await contextOf(`slack:${slackBot()}:${await sendSlack({ type: "member_joined_channel", user: "U88", channel: "C-DATA6", channel_type: "C", inviter: "U42" })}`);
    expect(sortedKeys(joined.event.data)).toEqual(keysFor("Slack", "member_joined_channel"));
    // Another joining while the first one's welcome waits: its run names them both.
    const first = await sendSlack({ type: "member_joined_channel", user: "U89", channel: "C-DATA9", channel_type: "C", inviter: "U42" });
    await sendSlack({ type: "member_joined_channel", user: "U90", channel: "C-DATA9", channel_type: "C", inviter: "U42" });
    const together = await contextOf(`slack:${slackBot()}:${first}`);
    expect(sortedKeys(together.event.data)).toEqual(keysFor("Slack", "member_joined_channel", ["members", "members_count"]));
    expect(together.event.data.members).toEqual([
      { actor_type: "user", actor_id: "U89", actor_name: null, metadata: {} },
      { actor_type: "user", actor_id: "U90", actor_name: null, metadata: {} },
    ]);
    expect(together.event.data.members_count).toBe(2);

    const recalled = await contextOf(`slack:${slackBot()}:${await sendSlack(slackDeletion("C-DATA7", slackTs(), slackTs()))}`);
    expect(sortedKeys(recalled.event.data)).toEqual(keysFor("Slack", "message.message_deleted"));
    expect(recalled.delivery).toEqual({ surface: "slack", supports_streaming: false, supports_edit: false, supports_reaction: false, platform_capabilities: {} });

    // Recorded, not run: its record's data is what README lists.
    const editId = await sendSlack(slackEdit("C-DATA8", slackTs(), "fixed", slackTs(), slackTs()));
    const [edit] = await waitFor(() => host.query<{ data_json: string }>("SELECT data_json FROM event_log WHERE event_id = ?", [`slack:${slackBot()}:${editId}`]).then((r) => r.length > 0 && r), 15_000, "the edit's record");
    expect(sortedKeys(JSON.parse(edit.data_json))).toEqual(keysFor("Slack", "message.message_changed", ["message_id"]));
  });

  async function sendLark(type: string, event: Record<string, unknown>): Promise<string> {
    const payload = { schema: "2.0", header: { event_id: `ev_contract_${++n}`, event_type: type, create_time: String(Date.now()), token: LARK.verification_token, app_id: LARK.app_id, tenant_key: "tenant_1" }, event };
    await postJson(hooks.lark, payload);
    return `lark:${hooks.lark.split("/").pop()}:${payload.header.event_id}`;
  }
  const larkSender = { sender_id: { open_id: "ou_ada", union_id: "on_ada" }, sender_type: "user", tenant_key: "tenant_1" };
  const larkMessage = (chat: string, type: string, content: unknown, extra: Record<string, unknown> = {}) => ({ sender: larkSender, message: { message_id: `om_c${++n}`, chat_id: chat, chat_type: "group", message_type: type, content: JSON.stringify(content), ...extra } });

  it("Lark: a message, a reply, a location, a card press, a recall and a join", async () => {
    const said = await contextOf(await sendLark("im.message.receive_v1", larkMessage("oc_data", "text", { text: "hello" })));
    expect(sortedKeys(said.event.data)).toEqual(keysFor("Lark", "im.message.receive_v1"));
    // No mention: a list all the same, not null.
    expect(said.event.data).toMatchObject({ root_id: null, parent_id: null, mentions: [], raw_text: "hello", reply_to: null });
    expect(sortedKeys(said.delivery.reply_target)).toEqual(shapeAfter("`ctx.delivery.reply_target`", "Lark"));

    const reply = await contextOf(await sendLark("im.message.receive_v1", larkMessage("oc_data2", "text", { text: "why?" }, { parent_id: "om_unreadable", root_id: "om_unreadable" })));
    expect(sortedKeys(reply.event.data.reply_to)).toEqual(shapeAfter("`reply_to`", "the message replied to"));
    expect(reply.event.data.reply_to).toMatchObject({ message_id: "om_unreadable", actor: null, text: null, unavailable: expect.stringMatching(/permissions/) });

    const here = await contextOf(await sendLark("im.message.receive_v1", larkMessage("oc_data3", "location", { name: "Eiffel Tower", latitude: "48.8584", longitude: "2.2945" })));
    expect(sortedKeys(here.event.data)).toEqual(keysFor("Lark", "im.message.receive_v1", ["content"]));

    const press = { operator: { open_id: "ou_ada" }, action: { tag: "button", name: "ship", value: { go: true } }, host: "im_message", context: { open_message_id: "om_card", open_chat_id: "oc_data4" } };
    const pressed = await contextOf(await sendLark("card.action.trigger", press));
    expect(sortedKeys(pressed.event.data)).toEqual(keysFor("Lark", "card.action.trigger"));
    expect(sortedKeys(pressed.event.data.component)).toEqual([...shapeAfter("`component`", "every press"), "value"].sort());

    // A press on a legacy message card: signed with the verification token, keyed by its body's digest.
    const legacy = JSON.stringify({ open_id: "ou_ada", open_message_id: "om_old_card", open_chat_id: "oc_data4", tenant_key: "tenant_1", action: { tag: "button", value: { old: true } } });
    const signedAt = String(Math.floor(Date.now() / 1000));
    const signature = createHash("sha1").update(signedAt + "nonce" + LARK.verification_token + legacy).digest("hex");
    const res = await fetch(hooks.lark, { method: "POST", headers: { "content-type": "application/json", "x-lark-request-timestamp": signedAt, "x-lark-request-nonce": "nonce", "x-lark-signature": signature }, body: legacy });
    expect(res.status).toBe(200);
    const old = await waitFor(() => runner.contexts.find((c) => c.event.source_event_type === "card.action.trigger_v1"), 15_000, "the legacy press's run");
    expect(sortedKeys(old.event.data)).toEqual(keysFor("Lark", "card.action.trigger_v1"));
    expect(old.event.data).toMatchObject({ lark_event_id: null, host: null, open_message_id: "om_old_card" });

    const recalled = await contextOf(await sendLark("im.message.recalled_v1", { message_id: "om_gone", chat_id: "oc_data5", recall_time: "1", recall_type: "message_owner" }));
    expect(sortedKeys(recalled.event.data)).toEqual(keysFor("Lark", "im.message.recalled_v1"));
    // Lark's recall names no one; like any recall, it has nowhere to reply.
    expect(recalled.actor).toEqual({ actor_type: "unknown", metadata: {} });
    expect(recalled.delivery).toEqual({ surface: "lark", supports_streaming: false, supports_edit: false, supports_reaction: false, platform_capabilities: {} });

    const added = await sendLark("im.chat.member.user.added_v1", { chat_id: "oc_data6", operator_id: { open_id: "ou_ada" }, users: [{ name: "Cy", user_id: { open_id: "ou_cy" } }] });
    const joined = await contextOf(`${added}:ou_cy`);
    expect(sortedKeys(joined.event.data)).toEqual(keysFor("Lark", "im.chat.member.user.added_v1"));
  });

  it("Discord: a slash command, a component press and a modal submit", async () => {
    const discordBot = hooks.discord.split("/").pop();
    const base = { application_id: DISCORD_APP, guild_id: "G1", channel_id: "C-DATA", member: { user: { id: "U42", username: "ada" }, nick: null }, version: 1 };
    const interact = async (type: number, data: Record<string, unknown>, extra: Record<string, unknown> = {}) => {
      const id = String(900_000_000 + ++n);
      expect((await postInteraction(hooks.discord, discordKey.privateKey, { ...base, id, type, token: `tok-${id}`, data, ...extra })).status).toBe(200);
      return contextOf(`discord:${discordBot}:${id}`);
    };
    const command = await interact(2, { id: "cmd1", name: "ask", type: 1, options: [{ name: "question", type: 3, value: "hi" }] });
    expect(sortedKeys(command.event.data)).toEqual(keysFor("Discord", "APPLICATION_COMMAND"));
    expect(command.event.data).toMatchObject({ interaction_type: 2, guild_id: "G1", channel_id: "C-DATA" });
    expect(sortedKeys(command.delivery.reply_target)).toEqual(shapeAfter("`ctx.delivery.reply_target`", "Discord"));

    const press = await interact(3, { custom_id: "ship", component_type: 2 }, { message: { id: "M1", flags: 0 } });
    expect(sortedKeys(press.event.data)).toEqual(keysFor("Discord", "MESSAGE_COMPONENT"));
    expect(sortedKeys(press.event.data.component)).toEqual(shapeAfter("`component`", "every press"));
    // Discord's numbers, where the other platforms name the element.
    expect(press.event.data).toMatchObject({ interaction_type: 3, component: { custom_id: "ship", component_type: 2, values: [] }, message_id: "M1" });

    const modal = await interact(5, { custom_id: "feedback", components: [{ type: 1, components: [{ type: 4, custom_id: "what", value: "more tests" }] }] });
    expect(sortedKeys(modal.event.data)).toEqual(keysFor("Discord", "MODAL_SUBMIT"));
    expect(modal.event.data).toMatchObject({ interaction_type: 5, modal: { custom_id: "feedback", fields: { what: "more tests" } } });
  });

});
