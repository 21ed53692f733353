import type { ServerResponse } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runOf, startSteererAndPlain } from "../support/conversation-runners";
import { sayOnTelegram, startFakePlatform, telegramBotApi, upgradeOnTelegram, waitFor } from "../support/fake-platform";
import { putAgent } from "../support/scripted-runner";
import type { TestHost } from "../support/host";
import type { RunCall } from "../support/runner";

/** Telegram messages bursting into a busy chat, under steer and interrupt: each message one fate, one reply per run that answered, and the half answer an interrupted run streamed marked so. */
const BOT_TOKEN = "123456:TEST-telegram-busy-abcdefgh";
const SECRET = "tg-busy-secret-0123456789";
let setup: Awaited<ReturnType<typeof startSteererAndPlain>>;
let host: TestHost;
let fake: Awaited<ReturnType<typeof startFakePlatform>>;
let botId: string;
let webhookUrl: string;
const runsOf = new Map<string, string[]>();
/** Chats where Telegram refuses to edit the bot's messages (deleted by an admin, say). */
const refusingEdits = new Set<string>();
const pulledOf = new Map<string, string[]>();
/** When each chat's runs reached their runner (ms since the epoch). */
const startedAt = new Map<string, number[]>();
/** The text parts of `input.contents` each chat's runs started with, and of the items they pulled. */
const textPartsOf = new Map<string, string[][]>();
const textParts = (input: { contents?: { type: string; text?: string }[] }) => (input.contents ?? []).flatMap((el) => (el.type === "text" ? [el.text ?? ""] : []));
/** The artifacts each chat's runs started with, and the items they pulled had: in `input.attachments` and in `input.contents`. */
const filesOf = new Map<string, { attachments: string[]; parts: string[] }[]>();
const filesIn = (input: { attachments?: { artifact_id: string }[]; contents?: { artifact_id?: string }[] }) => ({ attachments: (input.attachments ?? []).map((a) => a.artifact_id), parts: (input.contents ?? []).flatMap((el) => (el.artifact_id ? [el.artifact_id] : [])) });

async function behave(call: RunCall, res: ServerResponse) {
  const { ctx, w, conversation, text, api } = runOf(call, res);
  runsOf.set(conversation, [...(runsOf.get(conversation) ?? []), text]);
  startedAt.set(conversation, [...(startedAt.get(conversation) ?? []), Date.now()]);
  textPartsOf.set(conversation, [...(textPartsOf.get(conversation) ?? []), textParts(ctx.input)]);
  filesOf.set(conversation, [...(filesOf.get(conversation) ?? []), filesIn(ctx.input)]);
  // `draft <words>[ | <more>]`: streams the words (the more 200 ms later), then holds: an answer the chat shows half of.
  if (text.startsWith("draft ")) {
    const [first, more] = text.slice("draft ".length).split(" | ");
    w.send("message.delta", { chunk: { role: "assistant", content: first } });
    if (more) {
      await new Promise((r) => setTimeout(r, 200));
      w.send("message.delta", { chunk: { role: "assistant", content: ` ${more}` } });
    }
  }
  // `draftfail <words>`: streams the words, then fails: an answer the chat shows half of, which will never come whole.
  if (text.startsWith("draftfail ")) {
    w.send("message.delta", { chunk: { role: "assistant", content: text.slice("draftfail ".length) } });
    await new Promise((r) => setTimeout(r, 1200));
    return void w.send("run.failed", { code: "upstream_down", error: "the model is down", retryable: false });
  }
  if (text.startsWith("hold") || text.startsWith("draft ")) await setup.gate(conversation).promise;
  const items = ctx.config.pull === "all" ? ((await api("steering.pull")).body.data?.items ?? []) : [];
  pulledOf.set(conversation, [...(pulledOf.get(conversation) ?? []), ...items.map((i: any) => i.input.text)]);
  textPartsOf.set(conversation, [...(textPartsOf.get(conversation) ?? []), ...items.map((i: any) => textParts(i.input))]);
  filesOf.set(conversation, [...(filesOf.get(conversation) ?? []), ...items.map((i: any) => filesIn(i.input))]);
  w.reply(`re: ${[text, ...items.map((i: any) => i.input.text)].join("+")}`);
}

beforeAll(async () => {
  const api = telegramBotApi(BOT_TOKEN);
  fake = await startFakePlatform((call) =>
    call.path.endsWith("/editMessageText") && refusingEdits.has(String(call.body?.chat_id)) ? { status: 400, json: { ok: false, error_code: 400, description: "Bad Request: message can't be edited" } } : api(call),
  );
  setup = await startSteererAndPlain(behave, (steering) => [{ name: "default", label: { en_US: "r" }, capabilities: { streaming: true, steering }, permissions: {} }]);
  host = setup.host;
  const created = await host.admin("POST", "/v1/admin/bots", { platform: "telegram", name: "tg", api_base_url: fake.url, credentials: { bot_token: BOT_TOKEN, secret_token: SECRET } });
  expect(created.status).toBe(201);
  botId = created.body.bot_id;
  webhookUrl = created.body.webhook_url;
});
afterAll(async () => {
  await setup?.dispose();
  await fake?.close();
});

const edits = (chat: string) => fake.callsTo(/\/editMessageText$/).filter((c) => String(c.body?.chat_id) === chat);
const sent = (chat: string) => fake.callsTo(/\/sendMessage$/).filter((c) => String(c.body?.chat_id) === chat).map((c) => c.body.text as string);

async function messageEvents(chat: string) {
  return host.query<{ event_id: string; disposition: string; run_id: string | null; summary: string }>(
    "SELECT event_id, disposition, run_id, input_summary AS summary FROM event_log WHERE conversation_id = ? AND event_type = 'message.received' ORDER BY seq",
    [chat],
  );
}

async function quiet(chat: string) {
  await waitFor(async () => (await host.query<{ n: number }>("SELECT count(*) AS n FROM run WHERE conversation_id = ? AND status IN ('created','running')", [chat]))[0].n === 0, 30_000, "quiet");
  await new Promise((r) => setTimeout(r, 500));
}

/** Telegram delivering Ada's edit of her message `messageId` in `chat`, made at `editDate` (seconds). */
let editUpdateId = 900_000;
function editOnTelegram(chat: string, messageId: number, text: string, editDate: number, photo?: string): Promise<Response> {
  const words = photo ? { photo: [{ file_id: photo, width: 800, height: 800 }], caption: text } : { text };
  const edited = { message_id: messageId, date: editDate - 5, edit_date: editDate, chat: { id: Number(chat), type: "supergroup" }, from: { id: 42, is_bot: false, first_name: "Ada" }, ...words };
  return fetch(webhookUrl, { method: "POST", headers: { "content-type": "application/json", "x-telegram-bot-api-secret-token": SECRET }, body: JSON.stringify({ update_id: ++editUpdateId, edited_message: edited }) });
}
/** The Telegram message id of the message a chat's event says `summary`. */
const messageIdOf = async (chat: string, summary: string) =>
  (await host.query<{ id: number }>("SELECT json_extract(data_json, '$.message_id') AS id FROM event_log WHERE conversation_id = ? AND input_summary = ?", [chat, summary]))[0].id;

describe("a Telegram chat busy with a run", () => {
  it("steer: ten messages at once are pulled by the run (or dropped), and the chat gets one reply per run", async () => {
    const chat = "-70001";
    await putAgent(host, { agent_id: "tg-steer", name: "s", runner_id: setup.steerer.runnerId(), runner_config: { pull: "all" }, scope: { type: "conversation", id: chat, bot_id: botId }, concurrency: { strategy: "steer" } });
    expect((await sayOnTelegram(webhookUrl, SECRET, chat, "hold first")).status).toBe(200);
    await waitFor(() => (runsOf.get(chat) ?? []).length === 1, 10_000, "the first run");
    const acks = await Promise.all(Array.from({ length: 10 }, (_, i) => sayOnTelegram(webhookUrl, SECRET, chat, `t${i}`)));
    expect(acks.map((a) => a.status)).toEqual(acks.map(() => 200));
    setup.gate(chat).resolve();
    await quiet(chat);
    const events = await messageEvents(chat);
    expect(events).toHaveLength(11);
    expect(events.filter((e) => e.disposition === "steered")).toHaveLength(10);
    const completed = await host.query<{ n: number }>("SELECT count(*) AS n FROM run WHERE conversation_id = ? AND status = 'completed'", [chat]);
    expect({ runs: runsOf.get(chat), replies: sent(chat).length }).toEqual({ runs: ["hold first"], replies: completed[0].n });
    expect([...(pulledOf.get(chat) ?? [])].sort()).toEqual(Array.from({ length: 10 }, (_, i) => `t${i}`).sort());
  }, 60_000);

  it("an edit of a message still waiting, claimed by the busy run (steer) or in a run of its own (enqueue), is answered as edited; the latest edit wins", async () => {
    const now = Math.floor(Date.now() / 1000);
    for (const [chat, strategy] of [["-70006", "steer"], ["-70007", "enqueue"]] as const) {
      const runner = strategy === "steer" ? setup.steerer : setup.plain;
      await putAgent(host, { agent_id: `tg-edit-${strategy}`, name: strategy, runner_id: runner.runnerId(), runner_config: { pull: strategy === "steer" ? "all" : "never" }, scope: { type: "conversation", id: chat, bot_id: botId }, concurrency: { strategy } });
      expect((await sayOnTelegram(webhookUrl, SECRET, chat, "hold first")).status).toBe(200);
      await waitFor(() => (runsOf.get(chat) ?? []).length === 1, 10_000, "the first run");
      expect((await sayOnTelegram(webhookUrl, SECRET, chat, "waht time")).status).toBe(200);
      const typo = await messageIdOf(chat, "waht time");
      expect((await editOnTelegram(chat, typo, "what time is it", now + 2)).status).toBe(200);
      // An earlier edit Telegram delivers late: the newer words stand.
      expect((await editOnTelegram(chat, typo, "what time", now + 1)).status).toBe(200);
      setup.gate(chat).resolve();
      await quiet(chat);
      expect(sent(chat)).toEqual(strategy === "steer" ? ["re: hold first+what time is it"] : ["re: hold first", "re: what time is it"]);
      // Later runs' history reads it as edited too; EventLog keeps it as sent.
      const items = await host.query<{ content: string }>("SELECT t.content FROM transcript t JOIN event_log e ON e.event_id = t.event_id WHERE e.conversation_id = ? AND e.input_summary = 'waht time' AND t.role = 'user'", [chat]);
      expect(items).toEqual([{ content: "what time is it" }]);
    }
  }, 60_000);

  it("a photo's caption edited while it waits (claimed, or in a run of its own) and after: its runner, and later runs' history, read the new caption in input.contents and content_json too", async () => {
    const now = Math.floor(Date.now() / 1000);
    for (const [chat, strategy, messageId] of [["-70010", "steer", 891_001], ["-70011", "enqueue", 891_002]] as const) {
      const runner = strategy === "steer" ? setup.steerer : setup.plain;
      await putAgent(host, { agent_id: `tg-caption-${strategy}`, name: strategy, runner_id: runner.runnerId(), runner_config: { pull: strategy === "steer" ? "all" : "never" }, scope: { type: "conversation", id: chat, bot_id: botId }, concurrency: { strategy } });
      expect((await sayOnTelegram(webhookUrl, SECRET, chat, "hold first")).status).toBe(200);
      await waitFor(() => (runsOf.get(chat) ?? []).length === 1, 10_000, "the first run");
      const message = { message_id: messageId, date: now, chat: { id: Number(chat), type: "supergroup" }, from: { id: 42, is_bot: false, first_name: "Ada" }, photo: [{ file_id: `cap-${messageId}`, width: 800, height: 800 }], caption: "teh cat" };
      const sentPhoto = await fetch(webhookUrl, { method: "POST", headers: { "content-type": "application/json", "x-telegram-bot-api-secret-token": SECRET }, body: JSON.stringify({ update_id: ++editUpdateId, message }) });
      expect(sentPhoto.status).toBe(200);
      expect((await editOnTelegram(chat, messageId, "the cat", now + 1, `cap-${messageId}`)).status).toBe(200);
      setup.gate(chat).resolve();
      await quiet(chat);
      // The runner got the caption as edited, in its text and in its parts (the photo kept).
      expect(strategy === "steer" ? pulledOf.get(chat) : runsOf.get(chat)?.slice(1)).toEqual(["the cat"]);
      expect(textPartsOf.get(chat)?.slice(1)).toEqual([["the cat"]]);
      // Edited again once answered: history reads the newest caption, in content and content_json alike.
      expect((await editOnTelegram(chat, messageId, "the cat, asleep", now + 2, `cap-${messageId}`)).status).toBe(200);
      const [item] = await host.query<{ content: string; content_json: string }>("SELECT t.content, t.content_json FROM transcript t JOIN event_log e ON e.event_id = t.event_id WHERE e.conversation_id = ? AND e.input_summary = 'teh cat' AND t.role = 'user'", [chat]);
      const parts = JSON.parse(item.content_json) as { type: string; text?: string }[];
      expect({ content: item.content, parts: parts.map((p) => p.text ?? p.type) }).toEqual({ content: "the cat, asleep", parts: ["the cat, asleep", "image"] });
    }
    // A caption added to a photo sent without one, then taken away: its parts follow, the photo kept.
    const chat = "-70011";
    const message = { message_id: 891_003, date: now, chat: { id: Number(chat), type: "supergroup" }, from: { id: 42, is_bot: false, first_name: "Ada" }, photo: [{ file_id: "cap-891003", width: 800, height: 800 }] };
    expect((await fetch(webhookUrl, { method: "POST", headers: { "content-type": "application/json", "x-telegram-bot-api-secret-token": SECRET }, body: JSON.stringify({ update_id: ++editUpdateId, message }) })).status).toBe(200);
    await quiet(chat);
    const partsNow = async () => {
      const [item] = await host.query<{ content: string | null; content_json: string }>("SELECT t.content, t.content_json FROM transcript t JOIN event_log e ON e.event_id = t.event_id WHERE e.conversation_id = ? AND json_extract(e.data_json, '$.message_id') = 891003 AND t.role = 'user'", [chat]);
      return { content: item.content, parts: (JSON.parse(item.content_json) as { type: string; text?: string }[]).map((p) => p.text ?? p.type) };
    };
    expect((await editOnTelegram(chat, 891_003, "a dog", now + 1, "cap-891003")).status).toBe(200);
    expect(await partsNow()).toEqual({ content: "a dog", parts: ["a dog", "image"] });
    const uncaptioned = { message_id: 891_003, date: now, edit_date: now + 2, chat: message.chat, from: message.from, photo: message.photo };
    expect((await fetch(webhookUrl, { method: "POST", headers: { "content-type": "application/json", "x-telegram-bot-api-secret-token": SECRET }, body: JSON.stringify({ update_id: ++editUpdateId, edited_message: uncaptioned }) })).status).toBe(200);
    expect(await partsNow()).toEqual({ content: null, parts: ["image"] });
  }, 60_000);

  it("a photo replaced while it waits (claimed, or in a run of its own): its runner gets the new caption without the replaced photo, which history no longer lists either", async () => {
    const now = Math.floor(Date.now() / 1000);
    for (const [chat, strategy, messageId] of [["-70012", "steer", 892_001], ["-70013", "enqueue", 892_002]] as const) {
      const runner = strategy === "steer" ? setup.steerer : setup.plain;
      await putAgent(host, { agent_id: `tg-replaced-${strategy}`, name: strategy, runner_id: runner.runnerId(), runner_config: { pull: strategy === "steer" ? "all" : "never" }, scope: { type: "conversation", id: chat, bot_id: botId }, concurrency: { strategy } });
      expect((await sayOnTelegram(webhookUrl, SECRET, chat, "hold first")).status).toBe(200);
      await waitFor(() => (runsOf.get(chat) ?? []).length === 1, 10_000, "the first run");
      const message = (photo: string, caption: string, editDate?: number) => ({ message_id: messageId, date: now, ...(editDate ? { edit_date: editDate } : {}), chat: { id: Number(chat), type: "supergroup" }, from: { id: 42, is_bot: false, first_name: "Ada" }, photo: [{ file_id: photo, file_unique_id: `${photo}-u`, width: 800, height: 800 }], caption });
      const deliver = (kind: "message" | "edited_message", body: object) => fetch(webhookUrl, { method: "POST", headers: { "content-type": "application/json", "x-telegram-bot-api-secret-token": SECRET }, body: JSON.stringify({ update_id: ++editUpdateId, [kind]: body }) });
      expect((await deliver("message", message(`old-${messageId}`, "this one"))).status).toBe(200);
      const [{ artifact_id: replaced }] = await host.query<{ artifact_id: string }>("SELECT artifact_id FROM artifact WHERE json_extract(metadata_json, '$.platform_file_id') = ?", [`old-${messageId}-u`]);
      // Another photo in its place: the one the host stored for it has expired.
      expect((await deliver("edited_message", message(`new-${messageId}`, "this one instead", now + 1))).status).toBe(200);
      setup.gate(chat).resolve();
      await quiet(chat);
      expect(strategy === "steer" ? pulledOf.get(chat) : runsOf.get(chat)?.slice(1)).toEqual(["this one instead"]);
      expect(filesOf.get(chat)?.slice(1)).toEqual([{ attachments: [], parts: [] }]);
      expect(textPartsOf.get(chat)?.slice(1)).toEqual([["this one instead"]]);
      const [item] = await host.query<{ content_json: string | null; artifact_refs_json: string }>("SELECT t.content_json, t.artifact_refs_json FROM transcript t JOIN event_log e ON e.event_id = t.event_id WHERE e.conversation_id = ? AND e.input_summary = 'this one' AND t.role = 'user'", [chat]);
      expect({ parts: JSON.parse(item.content_json ?? "[]"), refs: JSON.parse(item.artifact_refs_json) }).toEqual({ parts: [{ type: "text", text: "this one instead" }], refs: [] });
      expect(item.content_json + item.artifact_refs_json).not.toContain(replaced);
    }
  }, 60_000);

  it("steer with debounce: a message claimed by an album's run pushes its start back, and an album item joining after it does not pull that start forward again", async () => {
    const chat = "-70008";
    await putAgent(host, { agent_id: "tg-album-burst", name: "a", runner_id: setup.steerer.runnerId(), runner_config: { pull: "all" }, scope: { type: "conversation", id: chat, bot_id: botId }, concurrency: { strategy: "steer", debounce_ms: 3000, debounce_max_ms: 20_000 } });
    const photo = (messageId: number, caption?: string) => {
      const message = { message_id: messageId, date: Math.floor(Date.now() / 1000), chat: { id: Number(chat), type: "supergroup" }, from: { id: 42, is_bot: false, first_name: "Ada" }, media_group_id: "album-burst", photo: [{ file_id: `burst-${messageId}`, width: 800, height: 800 }], ...(caption ? { caption } : {}) };
      return fetch(webhookUrl, { method: "POST", headers: { "content-type": "application/json", "x-telegram-bot-api-secret-token": SECRET }, body: JSON.stringify({ update_id: ++editUpdateId, message }) });
    };
    expect((await photo(880_001, "look")).status).toBe(200);
    await new Promise((r) => setTimeout(r, 2000));
    const saidAt = Date.now();
    expect((await sayOnTelegram(webhookUrl, SECRET, chat, "what are these")).status).toBe(200);
    // The album's second item, slow to come (its file downloaded first), arrives after the message.
    await new Promise((r) => setTimeout(r, 200));
    expect((await photo(880_002)).status).toBe(200);
    await quiet(chat);
    expect((await messageEvents(chat)).map((e) => e.disposition)).toEqual(["bound", "steered", "merged"]);
    expect({ runs: runsOf.get(chat), pulled: pulledOf.get(chat) }).toEqual({ runs: ["look"], pulled: ["what are these"] });
    // debounce_ms of quiet after the message the run claimed, not only ALBUM_WAIT_MS after the album's last item.
    expect(startedAt.get(chat)![0] - saidAt).toBeGreaterThanOrEqual(2900);
  }, 60_000);

  it("interrupt: ten messages at once, however they reach the conversation, only the newest is answered; the others stay silent", async () => {
    const chat = "-70002";
    await putAgent(host, { agent_id: "tg-interrupt", name: "i", runner_id: setup.plain.runnerId(), runner_config: { pull: "never" }, scope: { type: "conversation", id: chat, bot_id: botId }, concurrency: { strategy: "interrupt" } });
    expect((await sayOnTelegram(webhookUrl, SECRET, chat, "hold first")).status).toBe(200);
    await waitFor(() => (runsOf.get(chat) ?? []).length === 1, 10_000, "the first run");
    // Sent in order (their message ids rise with i), reaching the conversation in any order.
    await Promise.all(Array.from({ length: 10 }, (_, i) => sayOnTelegram(webhookUrl, SECRET, chat, `hold ${i}`)));
    setup.gate(chat).resolve();
    await quiet(chat);
    const runs = await host.query<{ status: string }>("SELECT status FROM run WHERE conversation_id = ?", [chat]);
    // An older message reaching the conversation before a newer one is interrupted by it; one reaching it after is rejected.
    const rejected = await host.query<{ n: number }>("SELECT count(*) AS n FROM event_log WHERE conversation_id = ? AND disposition = 'rejected'", [chat]);
    expect(runs.filter((r) => r.status === "completed")).toHaveLength(1);
    expect(runs.filter((r) => r.status === "cancelled").length + rejected[0].n).toBe(10);
    expect(sent(chat)).toEqual(["re: hold 9"]);
  }, 60_000);

  it("interrupt: the half answer the interrupted run streamed ends marked as cancelled, before the newer message's answer", async () => {
    const chat = "-70003";
    await putAgent(host, { agent_id: "tg-interrupt-draft", name: "d", runner_id: setup.plain.runnerId(), runner_config: { pull: "never" }, scope: { type: "conversation", id: chat, bot_id: botId }, concurrency: { strategy: "interrupt" } });
    expect((await sayOnTelegram(webhookUrl, SECRET, chat, "draft The answer is that the")).status).toBe(200);
    const draft = await waitFor(() => fake.callsTo(/\/sendMessage$/).find((c) => String(c.body?.chat_id) === chat && c.reply), 10_000, "the draft shown");
    expect(draft.body.text).toBe("The answer is that the");
    expect((await sayOnTelegram(webhookUrl, SECRET, chat, "second")).status).toBe(200);
    await waitFor(() => sent(chat).includes("re: second"), 15_000, "the newer message's answer");
    const runs = await host.query<{ status: string }>("SELECT status FROM run WHERE conversation_id = ? ORDER BY created_at", [chat]);
    expect(runs.map((r) => r.status)).toEqual(["cancelled", "completed"]);
    // The draft's message says it was cut short, and says so before the next answer is posted.
    const draftId = (draft.reply?.json as { result: { message_id: number } }).result.message_id;
    const marked = edits(chat).filter((c) => c.body.message_id === draftId);
    expect(marked.map((c) => c.body.text)).toEqual(["The answer is that the\n\n(This answer was cancelled.)"]);
    const order = fake.calls.filter((c) => String(c.body?.chat_id) === chat && /sendMessage|editMessageText/.test(c.path)).map((c) => c.body.text);
    expect(order).toEqual(["The answer is that the", "The answer is that the\n\n(This answer was cancelled.)", "re: second"]);
  }, 60_000);

  it("a half answer whose run then failed ends with the agent's failure notice, not as if it were the whole answer", async () => {
    const chat = "-70005";
    await putAgent(host, { agent_id: "tg-draft-failed", name: "f", runner_id: setup.plain.runnerId(), runner_config: { pull: "never" }, scope: { type: "conversation", id: chat, bot_id: botId }, delivery_policy: { failure_notice: "Sorry, that went wrong." } });
    expect((await sayOnTelegram(webhookUrl, SECRET, chat, "draftfail The answer is that the")).status).toBe(200);
    await quiet(chat);
    const runs = await host.query<{ status: string }>("SELECT status FROM run WHERE conversation_id = ?", [chat]);
    expect(runs.map((r) => r.status)).toEqual(["failed"]);
    const shown = fake.calls.filter((c) => String(c.body?.chat_id) === chat && /sendMessage|editMessageText/.test(c.path)).map((c) => c.body.text);
    expect(shown).toEqual(["The answer is that the", "The answer is that the\n\nSorry, that went wrong."]);
  }, 60_000);

  it("interrupt: a half answer whose marking edit Telegram refuses is left as it is, never posted again", async () => {
    const chat = "-70004";
    refusingEdits.add(chat);
    await putAgent(host, { agent_id: "tg-interrupt-refused", name: "r", runner_id: setup.plain.runnerId(), runner_config: { pull: "never" }, scope: { type: "conversation", id: chat, bot_id: botId }, concurrency: { strategy: "interrupt" } });
    expect((await sayOnTelegram(webhookUrl, SECRET, chat, "draft The answer | is that")).status).toBe(200);
    await waitFor(() => sent(chat).includes("The answer"), 10_000, "the draft shown");
    // The draft has grown since (not shown yet: edits wait a second) when the newer message interrupts it.
    await new Promise((r) => setTimeout(r, 400));
    expect((await sayOnTelegram(webhookUrl, SECRET, chat, "second")).status).toBe(200);
    await waitFor(() => sent(chat).includes("re: second"), 15_000, "the newer message's answer");
    await new Promise((r) => setTimeout(r, 500));
    expect(sent(chat)).toEqual(["The answer", "re: second"]);
  }, 60_000);

  it("a group upgraded to a supergroup: an edit there of a message numbered as the group's waiting one leaves that one as it was", async () => {
    const [group, supergroup] = ["-70030", "-1007003000001"];
    await putAgent(host, { agent_id: "tg-upgraded-wait", name: "u", runner_id: setup.plain.runnerId(), runner_config: { pull: "never" }, scope: { type: "conversation", id: group, bot_id: botId }, concurrency: { strategy: "enqueue" } });
    expect((await sayOnTelegram(webhookUrl, SECRET, group, "hold first")).status).toBe(200);
    await waitFor(() => (runsOf.get(group) ?? []).length === 1, 10_000, "the first run");
    expect((await sayOnTelegram(webhookUrl, SECRET, group, "group words")).status).toBe(200);
    const waiting = await messageIdOf(group, "group words");
    await upgradeOnTelegram(webhookUrl, SECRET, group, supergroup);
    // The supergroup numbers its messages anew: its message of that number is another (one the bot never got, edited to address it).
    expect((await editOnTelegram(supergroup, waiting, "supergroup words", Math.floor(Date.now() / 1000) + 1)).status).toBe(200);
    setup.gate(group).resolve();
    await quiet(group);
    expect(sent(group)).toEqual(["re: hold first", "re: group words"]);
    const items = await host.query<{ content: string }>("SELECT t.content FROM transcript t JOIN event_log e ON e.event_id = t.event_id WHERE e.conversation_id = ? AND e.input_summary = 'group words' AND t.role = 'user'", [group]);
    expect(items).toEqual([{ content: "group words" }]);
    // Recorded in the group's conversation, which the supergroup continues.
    const edits = await host.query<{ conversation_id: string }>("SELECT conversation_id FROM event_log WHERE bot_id = ? AND source_event_type = 'edited_message' AND conversation_id IN (?, ?)", [botId, group, supergroup]);
    expect(edits).toEqual([{ conversation_id: group }]);
  }, 60_000);

  it("interrupt: the supergroup's first question interrupts the run of the group it continues, though the supergroup numbers its messages anew", async () => {
    const [group, supergroup] = ["-70031", "-1007003100001"];
    await putAgent(host, { agent_id: "tg-upgraded-interrupt", name: "i", runner_id: setup.plain.runnerId(), runner_config: { pull: "never" }, scope: { type: "conversation", id: group, bot_id: botId }, concurrency: { strategy: "interrupt" } });
    expect((await sayOnTelegram(webhookUrl, SECRET, group, "hold in the group")).status).toBe(200);
    await waitFor(() => (runsOf.get(group) ?? []).length === 1, 10_000, "the group's run");
    await upgradeOnTelegram(webhookUrl, SECRET, group, supergroup);
    expect((await sayOnTelegram(webhookUrl, SECRET, supergroup, "after the upgrade", 2)).status).toBe(200);
    await waitFor(() => sent(supergroup).length > 0, 15_000, "the answer in the supergroup");
    setup.gate(group).resolve();
    await quiet(group);
    expect(sent(supergroup)).toEqual(["re: after the upgrade"]);
    expect(sent(group)).toEqual([]);
    const runs = await host.query<{ status: string }>("SELECT status FROM run WHERE conversation_id = ? ORDER BY created_at", [group]);
    expect(runs.map((r) => r.status)).toEqual(["cancelled", "completed"]);
  }, 60_000);
});
