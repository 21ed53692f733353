/**
 * A Telegram group upgraded to a supergroup (an admin turned on a supergroup feature): the chat gets a new id, the
 * group is closed, and its members go on in the supergroup. README: the supergroup's events go on in the group's
 * conversation, with its history and state; replies go to the supergroup; its message ids, numbered anew, never name
 * the group's messages.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestHost, type TestHost } from "../support/host";
import { callHostApi } from "../support/host-api";
import { addTelegramBot, startFakePlatform, telegramBotApi, upgradeOnTelegram, waitFor } from "../support/fake-platform";
import { resultWriter, startAdHocRunner } from "../support/runner";

const BOT_TOKEN = "123456:TEST-telegram-upgrade-abcdefgh";
const SECRET = "tg-upgrade-secret-0123456789";
/** Groups Telegram upgraded without the host hearing of it: a send there is refused, naming the supergroup. */
const upgradedUnheard = new Map([
  ["-4300", "-1004300000001"],
  ["-4400", "-1004400000001"],
]);

let host: TestHost;
let fake: Awaited<ReturnType<typeof startFakePlatform>>;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
let botId: string;
let webhookUrl: string;
/** Each run as its runner saw it: its context and the history it read. */
const runs: { ctx: any; history: string[] }[] = [];

beforeAll(async () => {
  const api = telegramBotApi(BOT_TOKEN);
  fake = await startFakePlatform((call) => {
    const to = upgradedUnheard.get(String(call.body?.chat_id));
    if (to) return { status: 400, json: { ok: false, error_code: 400, description: "Bad Request: group chat was upgraded to a supergroup chat", parameters: { migrate_to_chat_id: Number(to) } } };
    return api(call);
  });
  runner = await startAdHocRunner({
    name: "upgrade-memo",
    async onRun({ body }, res) {
      const ctx = body.context;
      const page = await callHostApi(ctx.runtime.api.base_url, ctx.run_id, ctx.runtime.api.token, "history.page", { limit: 50 });
      runs.push({ ctx, history: (page.body.data?.items ?? []).map((i: any) => String(i.content ?? "")) });
      const w = resultWriter(res, ctx.run_id);
      const text = String(ctx.input.text ?? "");
      if (text.startsWith("remember ")) w.send("state.updated", { scope: "conversation", key: "memo", value: text.slice("remember ".length) });
      w.reply(`ok ${text}`);
    },
  });
  host = await startTestHost();
  ({ botId, webhookUrl } = await addTelegramBot(host, { apiBaseUrl: fake.url, botToken: BOT_TOKEN, secretToken: SECRET }, { runner, agentId: "upgrade-agent" }));
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
  await fake?.close();
});

let updateId = 70_000;
async function deliver(kind: "message" | "edited_message", message: Record<string, unknown>) {
  const res = await fetch(webhookUrl, { method: "POST", headers: { "content-type": "application/json", "x-telegram-bot-api-secret-token": SECRET }, body: JSON.stringify({ update_id: ++updateId, [kind]: message }) });
  expect(res.status).toBe(200);
}
const ada = { id: 42, is_bot: false, first_name: "Ada" };
const now = () => Math.floor(Date.now() / 1000);
const chatOf = (id: string) => ({ id: Number(id), type: id.startsWith("-100") ? "supergroup" : "group", title: "Team" });
/** Ada says `text` in `chat` as its message `messageId`; answers the run the host made of it once its reply is sent. */
async function say(chat: string, messageId: number, text: string) {
  await deliver("message", { message_id: messageId, date: now(), chat: chatOf(chat), from: ada, text });
  const run = await waitFor(() => runs.find((r) => r.ctx.input.text === text), 15_000, `the run of "${text}"`);
  await waitFor(() => fake.callsTo(/\/sendMessage$/).some((c) => c.body.text === `ok ${text}` && c.reply?.status === undefined), 15_000, `the reply to "${text}"`);
  return run;
}
const upgrade = (group: string, supergroup: string) => upgradeOnTelegram(webhookUrl, SECRET, group, supergroup);
const sendsTo = (chat: string) => fake.callsTo(/\/sendMessage$/).filter((c) => String(c.body.chat_id) === chat);
const userItems = (conversationId: string) =>
  host.query<{ content: string | null; edited: string | null }>("SELECT content, json_extract(metadata_json, '$.edited.version') AS edited FROM transcript WHERE conversation_id = ? AND role = 'user' ORDER BY seq", [conversationId]);

describe("a Telegram group upgraded to a supergroup", () => {
  it("goes on in the group's conversation: the supergroup's messages read its history and state, and are answered in the supergroup", async () => {
    const [group, supergroup] = ["-4100", "-1004100000001"];
    await say(group, 5, "remember the plan is blue");
    await upgrade(group, supergroup);
    const { ctx, history } = await say(supergroup, 2, "what is the plan?");
    expect(ctx.conversation).toMatchObject({ conversation_id: group, bot_id: botId });
    expect(ctx.event.data).toMatchObject({ chat_id: supergroup, message_id: 2 });
    expect(ctx.state.conversation?.memo).toBe("the plan is blue");
    expect(history).toContain("remember the plan is blue");
    expect(ctx.delivery.reply_target).toMatchObject({ chat_id: supergroup, reply_to_message_id: 2 });
    const [reply] = sendsTo(supergroup);
    expect(reply.body).toMatchObject({ chat_id: supergroup, text: "ok what is the plan?", reply_parameters: { message_id: 2 } });
    // Both service messages are in the group's conversation too, nothing in one of the supergroup's own.
    const where = await host.query<{ conversation_id: string; n: number }>("SELECT conversation_id, count(*) AS n FROM event_log WHERE bot_id = ? AND conversation_id IN (?, ?) GROUP BY conversation_id", [botId, group, supergroup]);
    expect(where).toEqual([{ conversation_id: group, n: expect.any(Number) }]);
  }, 60_000);

  it("an edit of the supergroup's message 7 edits that message, never the group's message 7", async () => {
    const [group, supergroup] = ["-4200", "-1004200000001"];
    await say(group, 7, "seven in the group");
    await upgrade(group, supergroup);
    await say(supergroup, 7, "seven in the supergroup");
    await deliver("edited_message", { message_id: 7, date: now() - 5, edit_date: now(), chat: chatOf(supergroup), from: ada, text: "seven in the supergroup, edited" });
    await waitFor(async () => (await userItems(group)).some((i) => i.edited !== null), 15_000, "the edit");
    expect((await userItems(group)).map((i) => i.content)).toEqual(["seven in the group", "seven in the supergroup, edited"]);
    expect((await userItems(group))[0].edited).toBeNull();
  }, 60_000);

  it("an agent scoped to the supergroup's id (a conversation scope, with or without the bot) takes the supergroup's messages, recorded in the group's conversation", async () => {
    const scopes = { "-4600": { type: "conversation" }, "-4700": { type: "conversation", bot_id: botId } };
    for (const [group, scope] of Object.entries(scopes)) {
      const supergroup = `-100${group.slice(1)}000001`;
      const agentId = `supergroup-agent${group}`;
      const created = await host.admin("POST", "/v1/admin/agents", { agent_id: agentId, name: agentId, runner_id: runner.runnerId(), event_types: ["message.received"], scope: { ...scope, id: supergroup } });
      expect(created.status).toBe(201);
      const before = await say(group, 4, `hello group ${group}`);
      await upgrade(group, supergroup);
      const after = await say(supergroup, 2, `hello supergroup ${group}`);
      expect(after.ctx.conversation.conversation_id).toBe(group);
      const agentOf = async (run: { ctx: any }) => (await host.query<{ agent_id: string }>("SELECT agent_id FROM run WHERE run_id = ?", [run.ctx.run_id]))[0].agent_id;
      // The group's own messages stay with the bot's agent: the scope names the supergroup only.
      expect([await agentOf(before), await agentOf(after)]).toEqual(["upgrade-agent", agentId]);
    }
  }, 60_000);

  it("an agent scoped to the supergroup's id takes its messages before one scoped to the group's, whether or not either names the bot", async () => {
    const [group, supergroup] = ["-4900", "-1004900000001"];
    const agent = async (agentId: string, scope: Record<string, unknown>) =>
      expect((await host.admin("POST", "/v1/admin/agents", { agent_id: agentId, name: agentId, runner_id: runner.runnerId(), event_types: ["message.received"], scope })).status).toBe(201);
    await agent("group-agent-4900", { type: "conversation", id: group, bot_id: botId });
    await agent("supergroup-agent-4900", { type: "conversation", id: supergroup });
    const agentOf = async (run: { ctx: any }) => (await host.query<{ agent_id: string }>("SELECT agent_id FROM run WHERE run_id = ?", [run.ctx.run_id]))[0].agent_id;
    expect(await agentOf(await say(group, 4, "last in the group 4900"))).toBe("group-agent-4900");
    // Before the host learns of the upgrade (its service messages late) and after: the supergroup's agent both times.
    const unheard = await say(supergroup, 1, "first in the supergroup 4900");
    await upgrade(group, supergroup);
    const heard = await say(supergroup, 2, "then in the supergroup 4900");
    expect(heard.ctx.conversation.conversation_id).toBe(group);
    expect([await agentOf(unheard), await agentOf(heard)]).toEqual(["supergroup-agent-4900", "supergroup-agent-4900"]);
  }, 60_000);

  it("an edit of a supergroup message recorded before the host learned of the upgrade reaches it, in the supergroup's own conversation", async () => {
    const [group, supergroup] = ["-4800", "-1004800000001"];
    await say(group, 3, "three in the group");
    // The service messages come late (a webhook down for a while): the supergroup's first message has a conversation of its own.
    await say(supergroup, 3, "three in the supergroup");
    await upgrade(group, supergroup);
    await deliver("edited_message", { message_id: 3, date: now() - 5, edit_date: now(), chat: chatOf(supergroup), from: ada, text: "three in the supergroup, edited" });
    await waitFor(async () => (await userItems(supergroup)).some((i) => i.edited !== null), 15_000, "the edit");
    expect((await userItems(supergroup)).map((i) => i.content)).toEqual(["three in the supergroup, edited"]);
    expect((await userItems(group)).map((i) => [i.content, i.edited])).toEqual([["three in the group", null]]);
  }, 60_000);

  it("a reply the group refuses for the upgrade is made in the supergroup, whose messages go on in the group's conversation", async () => {
    const [group, supergroup] = ["-4300", upgradedUnheard.get("-4300")!];
    // The service messages never came (the bot was added back after the upgrade, a webhook was down for a day).
    await deliver("message", { message_id: 11, date: now(), chat: chatOf(group), from: ada, text: "remember the code is 77" });
    await waitFor(() => sendsTo(supergroup).some((c) => c.body.text === "ok remember the code is 77"), 15_000, "the reply in the supergroup");
    const { ctx } = await say(supergroup, 3, "what is the code?");
    expect(ctx.conversation.conversation_id).toBe(group);
    expect(ctx.state.conversation?.memo).toBe("the code is 77");
  }, 60_000);

  it("an answer the group refused and the supergroup took is recorded as the supergroup's message: a reply to it there reads it as the host recorded it", async () => {
    const [group, supergroup] = ["-4400", upgradedUnheard.get("-4400")!];
    await deliver("message", { message_id: 12, date: now(), chat: chatOf(group), from: ada, text: "say **hi** 88" });
    const posted = await waitFor(() => sendsTo(supergroup).find((c) => (c.reply?.json as any)?.ok === true), 15_000, "the answer in the supergroup");
    const answerId = (posted.reply!.json as any).result.message_id as number;
    await waitFor(async () => (await host.query("SELECT 1 FROM event_log WHERE event_type = 'delivery.succeeded' AND json_extract(data_json, '$.message_id') = ?", [String(answerId)])).length > 0, 15_000, "the answer's record");
    // Telegram gives the answer as the chat shows it; the host's record has it as the runner wrote it.
    const answer = { message_id: answerId, date: now(), chat: chatOf(supergroup), from: { id: 123456, is_bot: true, first_name: "Memo" }, text: "ok say hi 88" };
    await deliver("message", { message_id: 5, date: now(), chat: chatOf(supergroup), from: ada, text: "louder", reply_to_message: answer });
    const { ctx } = await waitFor(() => runs.find((r) => r.ctx.input.text === "louder"), 15_000, "the reply's run");
    expect(ctx.conversation.conversation_id).toBe(group);
    expect(ctx.event.data.reply_to).toMatchObject({ message_id: answerId, text: "ok say **hi** 88" });
  }, 60_000);
});
